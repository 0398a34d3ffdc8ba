// export_bench: times an exported kernel package through its public entry
// point against cuBLAS and cuBLASLt, in its own process: CUDA-graph replay
// of back-to-back calls in two regimes (hot: one operand set; cold: operand
// sets rotated, together over twice the L2), the host cost per call of
// anvil_hgemm against calling cuBLAS directly, and the library's load time.
//   anvil-export-bench --lib libanvil_hgemm.so --manifest manifest.csv --out DIR
// Writes DIR/regimes.csv, DIR/host.csv and DIR/load.csv and prints a table.
// The library is opened with dlopen (its load time is a figure); the header
// is the package's, export/package/include/anvil_hgemm.h.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "anvil_hgemm.h"

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)); std::exit(1); } } while (0)

namespace {

using Clock = std::chrono::steady_clock;
using HgemmFn = int (*)(int, int, int, int, const void*, const void*, void*, void*, size_t, cudaStream_t);
HgemmFn g_hgemm;
int (*g_dispatch)(int, int, int, int, const char**);

struct Row { int layout, m, n, k; std::string path, kernel; double hot_speedup = 0, cold_speedup = 0; };

std::vector<Row> ReadManifest(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  std::vector<std::string> cols;
  { std::stringstream h(line); std::string c; while (std::getline(h, c, ',')) cols.push_back(c); }
  std::vector<Row> out;
  while (std::getline(in, line)) {
    std::stringstream s(line); std::string c; Row r{};
    for (size_t i = 0; i < cols.size() && std::getline(s, c, ','); ++i) {
      if (cols[i] == "m") r.m = std::stoi(c);
      if (cols[i] == "n") r.n = std::stoi(c);
      if (cols[i] == "k") r.k = std::stoi(c);
      if (cols[i] == "layout") r.layout = c == "nt" ? ANVIL_HGEMM_NT : ANVIL_HGEMM_NN;
      if (cols[i] == "path") r.path = c;
      if (cols[i] == "kernel") r.kernel = c;
      if (cols[i] == "hot_speedup" && !c.empty()) r.hot_speedup = std::stod(c);
      if (cols[i] == "cold_speedup" && !c.empty()) r.cold_speedup = std::stod(c);
    }
    out.push_back(r);
  }
  return out;
}

struct Operands { std::vector<__half*> a, b, c; };

__global__ void Fill(__half* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = __float2half(((static_cast<unsigned>(i) * 2654435761u ^ seed) % 1024u) / 512.0f - 1.0f);
}

Operands Allocate(const Row& r, int sets) {
  Operands o;
  const size_t a = size_t(r.m) * r.k, b = size_t(r.n) * r.k, c = size_t(r.m) * r.n;
  for (int i = 0; i < sets; ++i) {
    __half *pa, *pb, *pc;
    CK(cudaMalloc(&pa, a * 2)); CK(cudaMalloc(&pb, b * 2)); CK(cudaMalloc(&pc, c * 2));
    Fill<<<512, 256>>>(pa, a, 3 + i); Fill<<<512, 256>>>(pb, b, 7 + i);
    o.a.push_back(pa); o.b.push_back(pb); o.c.push_back(pc);
  }
  CK(cudaDeviceSynchronize());
  return o;
}

void Free(Operands& o) {
  for (size_t i = 0; i < o.a.size(); ++i) { cudaFree(o.a[i]); cudaFree(o.b[i]); cudaFree(o.c[i]); }
}

using Call = std::function<void(int set, cudaStream_t)>;

// A graph of `calls` back-to-back calls, call i on operand set i % sets.
cudaGraphExec_t Capture(const Call& call, int calls, int sets, cudaStream_t s) {
  cudaGraph_t g;
  cudaGraphExec_t e;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < calls; ++i) call(i % sets, s);
  CK(cudaStreamEndCapture(s, &g));
  CK(cudaGraphInstantiate(&e, g, 0));
  cudaGraphDestroy(g);
  return e;
}

// Median per-call microseconds of each implementation, replays interleaved.
std::vector<double> TimeRegime(const std::vector<Call>& impls, int sets, cudaStream_t s) {
  cudaEvent_t t0, t1;
  cudaEventCreate(&t0); cudaEventCreate(&t1);
  std::vector<double> out;
  std::vector<cudaGraphExec_t> graphs;
  std::vector<int> calls;
  for (const Call& c : impls) {  // size each graph to about 2 ms of replay
    cudaGraphExec_t probe = Capture(c, 20, sets, s);
    CK(cudaGraphLaunch(probe, s)); CK(cudaStreamSynchronize(s));
    cudaEventRecord(t0, s); CK(cudaGraphLaunch(probe, s)); cudaEventRecord(t1, s);
    CK(cudaStreamSynchronize(s));
    float ms = 0; cudaEventElapsedTime(&ms, t0, t1);
    cudaGraphExecDestroy(probe);
    int n = std::clamp(static_cast<int>(2.0 / std::max(ms / 20, 1e-4f)), 20, 4000);
    n = (n + sets - 1) / sets * sets;
    calls.push_back(n);
    graphs.push_back(Capture(c, n, sets, s));
  }
  std::vector<std::vector<double>> samples(impls.size());
  for (int round = 0; round < 9; ++round) {
    for (size_t i = 0; i < impls.size(); ++i) {
      CK(cudaGraphLaunch(graphs[i], s));  // warm replay
      cudaEventRecord(t0, s); CK(cudaGraphLaunch(graphs[i], s)); cudaEventRecord(t1, s);
      CK(cudaStreamSynchronize(s));
      float ms = 0; cudaEventElapsedTime(&ms, t0, t1);
      samples[i].push_back(1000.0 * ms / calls[i]);
    }
  }
  for (size_t i = 0; i < impls.size(); ++i) {
    std::sort(samples[i].begin(), samples[i].end());
    out.push_back(samples[i][samples[i].size() / 2]);
    cudaGraphExecDestroy(graphs[i]);
  }
  cudaEventDestroy(t0); cudaEventDestroy(t1);
  return out;
}

struct Lt {
  cublasLtMatmulDesc_t desc; cublasLtMatrixLayout_t a, b, c; cublasLtMatmulAlgo_t algo;
};
Lt MakeLt(cublasLtHandle_t h, const Row& r, size_t ws) {
  Lt l{};
  const bool nt = r.layout == ANVIL_HGEMM_NT;
  cublasOperation_t opb = nt ? CUBLAS_OP_T : CUBLAS_OP_N, opn = CUBLAS_OP_N;
  cublasLtMatmulDescCreate(&l.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  cublasLtMatmulDescSetAttribute(l.desc, CUBLASLT_MATMUL_DESC_TRANSA, &opb, sizeof(opb));
  cublasLtMatmulDescSetAttribute(l.desc, CUBLASLT_MATMUL_DESC_TRANSB, &opn, sizeof(opn));
  cublasLtMatrixLayoutCreate(&l.a, CUDA_R_16F, nt ? r.k : r.n, nt ? r.n : r.k, nt ? r.k : r.n);
  cublasLtMatrixLayoutCreate(&l.b, CUDA_R_16F, r.k, r.m, r.k);
  cublasLtMatrixLayoutCreate(&l.c, CUDA_R_16F, r.n, r.m, r.n);
  cublasLtMatmulPreference_t pref;
  cublasLtMatmulPreferenceCreate(&pref);
  uint64_t w = ws;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &w, sizeof(w));
  cublasLtMatmulHeuristicResult_t res{}; int found = 0;
  cublasLtMatmulAlgoGetHeuristic(h, l.desc, l.a, l.b, l.c, l.c, pref, 1, &res, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  l.algo = res.algo;
  return l;
}

int CublasCall(cublasHandle_t h, const Row& r, const void* a, const void* b, void* c) {
  const float alpha = 1, beta = 0;
  const bool nt = r.layout == ANVIL_HGEMM_NT;
  return cublasGemmEx(h, nt ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, r.n, r.m, r.k, &alpha, b,
                      CUDA_R_16F, nt ? r.k : r.n, a, CUDA_R_16F, r.k, &beta, c, CUDA_R_16F, r.n,
                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

// Host nanoseconds per enqueued call: median over batches of 100 calls.
double HostNs(const std::function<void()>& call, cudaStream_t s) {
  std::vector<double> v;
  for (int batch = 0; batch < 21; ++batch) {
    auto t0 = Clock::now();
    for (int i = 0; i < 100; ++i) call();
    auto t1 = Clock::now();
    CK(cudaStreamSynchronize(s));
    v.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / 100);
  }
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Host cost per call on this shape (enqueue only), against cuBLAS directly:
// one line of OUT/host.csv, which the first shape starts afresh.
void WriteHostCost(const std::string& out, const Row& r, const Operands& o, cublasHandle_t blas,
                   void* ws_lib, size_t ws_bytes, cudaStream_t s) {
  static bool header = false;
  FILE* host = std::fopen((out + "/host.csv").c_str(), header ? "a" : "w");
  if (!header) std::fprintf(host, "m,n,k,layout,path,anvil_ns,cublas_ns,dispatch_query_ns\n"), header = true;
  const double a_ns = HostNs([&] { g_hgemm(r.layout, r.m, r.n, r.k, o.a[0], o.b[0], o.c[0], ws_lib, ws_bytes, s); }, s);
  const double c_ns = HostNs([&] { CublasCall(blas, r, o.a[0], o.b[0], o.c[0]); }, s);
  auto q0 = Clock::now();
  for (int i = 0; i < 100000; ++i) g_dispatch(r.layout, r.m, r.n, r.k, nullptr);
  const double q_ns = std::chrono::duration<double, std::nano>(Clock::now() - q0).count() / 100000;
  std::fprintf(host, "%d,%d,%d,%s,%s,%.0f,%.0f,%.1f\n", r.m, r.n, r.k, r.layout == ANVIL_HGEMM_NT ? "nt" : "nn",
               r.path.c_str(), a_ns, c_ns, q_ns);
  std::fclose(host);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"an exported kernel package against cuBLAS/cuBLASLt: graph regimes, host cost, load time"};
  std::string lib_path, manifest, out;
  app.add_option("--lib", lib_path, "libanvil_hgemm.so of the package's build")->required();
  app.add_option("--manifest", manifest, "the package's manifest.csv")->required();
  app.add_option("--out", out, "folder for regimes.csv, host.csv, load.csv")->required();
  CLI11_PARSE(app, argc, argv);
  CK(cudaFree(nullptr));  // the CUDA context is not part of the library's load time
  auto t0 = Clock::now();
  void* lib = dlopen(lib_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  auto t1 = Clock::now();
  if (lib == nullptr) { std::fprintf(stderr, "%s\n", dlerror()); return 1; }
  g_hgemm = reinterpret_cast<HgemmFn>(dlsym(lib, "anvil_hgemm"));
  g_dispatch = reinterpret_cast<int (*)(int, int, int, int, const char**)>(dlsym(lib, "anvil_hgemm_dispatch"));
  auto init = reinterpret_cast<int (*)()>(dlsym(lib, "anvil_hgemm_init"));
  auto message = reinterpret_cast<const char* (*)()>(dlsym(lib, "anvil_hgemm_status_message"));
  const int init_rc = init();
  auto t2 = Clock::now();
  const double load_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  const double init_ms = std::chrono::duration<double, std::milli>(t2 - t1).count();
  std::printf("load %.3f ms (dlopen), init %.3f ms (rc %d): %s\n", load_ms, init_ms, init_rc, message());

  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  cublasHandle_t blas; cublasCreate(&blas);
  cublasLtHandle_t lt; cublasLtCreate(&lt);
  cudaStream_t s; CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const size_t ws_bytes = size_t(64) << 20;
  void* ws; CK(cudaMalloc(&ws, ws_bytes));
  void* ws_lib; CK(cudaMalloc(&ws_lib, ws_bytes));
  cublasSetStream(blas, s);
  cublasSetWorkspace(blas, ws, ws_bytes);

  FILE* csv = std::fopen((out + "/regimes.csv").c_str(), "w");
  std::fprintf(csv, "m,n,k,layout,path,kernel,regime,sets,anvil_us,cublas_us,cublaslt_us,best_baseline_us,ratio,manifest_speedup\n");
  std::printf("%-20s %-3s %-8s %-5s %10s %10s %10s %7s %8s\n", "shape", "lay", "path", "reg", "anvil us", "cublas us", "lt us", "ratio", "manifest");
  double worst = 1e9;
  for (const Row& r : ReadManifest(manifest.c_str())) {
    const size_t set_bytes = (size_t(r.m) * r.k + size_t(r.n) * r.k + size_t(r.m) * r.n) * 2;
    const int cold_sets = std::max<int>(2, static_cast<int>(2 * size_t(prop.l2CacheSize) / set_bytes) + 1);
    Operands o = Allocate(r, cold_sets);
    Lt l = MakeLt(lt, r, ws_bytes);
    std::vector<Call> impls = {
        [&](int i, cudaStream_t st) { g_hgemm(r.layout, r.m, r.n, r.k, o.a[i], o.b[i], o.c[i], ws_lib, ws_bytes, st); },
        [&](int i, cudaStream_t st) { cublasSetStream(blas, st); cublasSetWorkspace(blas, ws, ws_bytes); CublasCall(blas, r, o.a[i], o.b[i], o.c[i]); },
        [&](int i, cudaStream_t st) { const float al = 1, be = 0;
          cublasLtMatmul(lt, l.desc, &al, o.b[i], l.a, o.a[i], l.b, &be, o.c[i], l.c, o.c[i], l.c, &l.algo, ws, ws_bytes, st); }};
    for (int regime = 0; regime < 2; ++regime) {
      const int sets = regime == 0 ? 1 : cold_sets;
      std::vector<double> t = TimeRegime(impls, sets, s);
      const double base = std::min(t[1], t[2]), ratio = base / t[0];
      const double manifest = regime == 0 ? r.hot_speedup : r.cold_speedup;
      worst = std::min(worst, ratio);
      std::fprintf(csv, "%d,%d,%d,%s,%s,%s,%s,%d,%.3f,%.3f,%.3f,%.3f,%.4f,%.4f\n", r.m, r.n, r.k,
                   r.layout == ANVIL_HGEMM_NT ? "nt" : "nn", r.path.c_str(), r.kernel.c_str(),
                   regime == 0 ? "hot" : "cold", sets, t[0], t[1], t[2], base, ratio, manifest);
      std::printf("%6dx%6dx%6d %-3s %-8s %-5s %10.2f %10.2f %10.2f %7.3f %8.3f\n", r.m, r.n, r.k,
                  r.layout == ANVIL_HGEMM_NT ? "nt" : "nn", r.path.c_str(), regime == 0 ? "hot" : "cold",
                  t[0], t[1], t[2], ratio, manifest);
    }
    WriteHostCost(out, r, o, blas, ws_lib, ws_bytes, s);
    Free(o);
  }
  std::fclose(csv);
  FILE* load = std::fopen((out + "/load.csv").c_str(), "w");
  std::fprintf(load, "dlopen_ms,init_ms,status\n%.3f,%.3f,\"%s\"\n", load_ms, init_ms, message());
  std::fclose(load);
  std::printf("lowest ratio against the best baseline: %.3f (expect >= 0.98 on every shape)\n", worst);
  return 0;
}
