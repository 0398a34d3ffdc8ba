// check_hgemm: runs every shape of this package's manifest and a few others
// through anvil_hgemm and checks each against cuBLAS: random normal inputs
// (relative error), exact 0/1 inputs (bit-exact), NaN-poisoned output, once
// eagerly and once replayed from a captured CUDA graph; and that dispatch
// sends each shape where manifest.csv says.
//   check_hgemm manifest.csv     exit 0: all passed, 1: a check failed, 77: no GPU
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "anvil_hgemm.h"

namespace {

struct Shape {
  int layout, m, n, k;
  std::string path, kernel;  // expected (from the manifest), empty: cublas
};

#define CHECK_CUDA(x)                                                          \
  do {                                                                         \
    cudaError_t e_ = (x);                                                      \
    if (e_ != cudaSuccess) {                                                   \
      std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));            \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)

__global__ void Fill(__half* p, size_t n, unsigned seed, int exact) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    unsigned h = static_cast<unsigned>(i) * 2654435761u ^ seed * 40503u ^ static_cast<unsigned>(i >> 32);
    h ^= h >> 15; h *= 2246822519u; h ^= h >> 13;
    if (exact) { p[i] = __float2half((h & 7u) == 0 ? 1.0f : 0.0f); continue; }
    // Sum of four uniforms, centred: close enough to normal, never all zero.
    float u = ((h & 255u) + ((h >> 8) & 255u) + ((h >> 16) & 255u) + (h >> 24)) / 255.0f - 2.0f;
    p[i] = __float2half(u);
  }
}

std::vector<Shape> ReadManifest(const char* path) {
  std::ifstream in(path);
  std::vector<Shape> out;
  std::string line, header;
  if (!std::getline(in, header)) return out;
  std::vector<std::string> cols;
  { std::stringstream h(header); std::string c; while (std::getline(h, c, ',')) cols.push_back(c); }
  while (std::getline(in, line)) {
    std::stringstream s(line);
    std::string c;
    Shape sh{};
    for (size_t i = 0; i < cols.size() && std::getline(s, c, ','); ++i) {
      if (cols[i] == "m") sh.m = std::stoi(c);
      if (cols[i] == "n") sh.n = std::stoi(c);
      if (cols[i] == "k") sh.k = std::stoi(c);
      if (cols[i] == "layout") sh.layout = c == "nt" ? ANVIL_HGEMM_NT : ANVIL_HGEMM_NN;
      if (cols[i] == "path") sh.path = c;
      if (cols[i] == "kernel") sh.kernel = c;
    }
    out.push_back(sh);
  }
  return out;
}

// Reference in fp32 by cublasGemmEx (row-major C = A * op(B), see anvil_hgemm.h).
void Reference(cublasHandle_t h, const Shape& s, const __half* a, const __half* b, float* c) {
  const float alpha = 1, beta = 0;
  const bool nt = s.layout == ANVIL_HGEMM_NT;
  if (cublasGemmEx(h, nt ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, s.n, s.m, s.k, &alpha, b,
                   CUDA_R_16F, nt ? s.k : s.n, a, CUDA_R_16F, s.k, &beta, c, CUDA_R_32F, s.n,
                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "reference cublasGemmEx failed\n");
    std::exit(1);
  }
}

// One run of anvil_hgemm (eager, or captured and replayed) against the reference.
bool RunOnce(const Shape& s, bool exact, bool graph, const __half* a, const __half* b, __half* c,
             void* ws, size_t ws_bytes, const std::vector<float>& ref, cudaStream_t stream) {
  const size_t mn = size_t(s.m) * s.n;
  CHECK_CUDA(cudaMemsetAsync(c, 0xFF, mn * sizeof(__half), stream));  // NaN poison
  int rc = 0;
  if (graph) {
    cudaGraph_t g;
    cudaGraphExec_t exec;
    CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    rc = anvil_hgemm(s.layout, s.m, s.n, s.k, a, b, c, ws, ws_bytes, stream);
    CHECK_CUDA(cudaStreamEndCapture(stream, &g));
    CHECK_CUDA(cudaGraphInstantiate(&exec, g, 0));
    CHECK_CUDA(cudaGraphLaunch(exec, stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(g);
  } else {
    rc = anvil_hgemm(s.layout, s.m, s.n, s.k, a, b, c, ws, ws_bytes, stream);
  }
  CHECK_CUDA(cudaStreamSynchronize(stream));
  if (rc != ANVIL_HGEMM_OK) {
    std::printf("  anvil_hgemm returned %d (%s)\n", rc, anvil_hgemm_status_string(rc));
    return false;
  }
  std::vector<__half> out(mn);
  CHECK_CUDA(cudaMemcpy(out.data(), c, mn * sizeof(__half), cudaMemcpyDeviceToHost));
  double err = 0, norm = 0;
  size_t bad = 0;
  for (size_t i = 0; i < mn; ++i) {
    const float v = __half2float(out[i]);
    if (!std::isfinite(v)) { ++bad; continue; }
    if (exact && v != __half2float(__float2half(ref[i]))) ++bad;
    err += double(v - ref[i]) * (v - ref[i]);
    norm += double(ref[i]) * ref[i];
  }
  const double rel = norm > 0 ? std::sqrt(err / norm) : std::sqrt(err);
  const bool ok = bad == 0 && (exact || rel < 5e-3);
  if (!ok) std::printf("  %s%s: %zu bad elements, rel err %.3g\n", exact ? "exact" : "random", graph ? " (graph)" : "", bad, rel);
  return ok;
}

bool Check(cublasHandle_t h, const Shape& s, cudaStream_t stream) {
  const size_t ka = size_t(s.m) * s.k, kb = size_t(s.n) * s.k, mn = size_t(s.m) * s.n;
  __half *a, *b, *c;
  float* ref;
  CHECK_CUDA(cudaMalloc(&a, ka * 2)); CHECK_CUDA(cudaMalloc(&b, kb * 2));
  CHECK_CUDA(cudaMalloc(&c, mn * 2)); CHECK_CUDA(cudaMalloc(&ref, mn * 4));
  const size_t ws_bytes = anvil_hgemm_workspace_bytes(s.layout, s.m, s.n, s.k);
  void* ws = nullptr;
  if (ws_bytes > 0) CHECK_CUDA(cudaMalloc(&ws, ws_bytes));
  bool ok = true;
  std::vector<float> host(mn);
  for (int exact = 0; exact < 2; ++exact) {
    Fill<<<1024, 256, 0, stream>>>(a, ka, 17 + exact, exact);
    Fill<<<1024, 256, 0, stream>>>(b, kb, 91 + exact, exact);
    cublasSetStream(h, stream);
    Reference(h, s, a, b, ref);
    CHECK_CUDA(cudaMemcpyAsync(host.data(), ref, mn * 4, cudaMemcpyDeviceToHost, stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
    for (int graph = 0; graph < 2; ++graph) {
      ok = RunOnce(s, exact, graph, a, b, c, ws, ws_bytes, host, stream) && ok;
    }
  }
  cudaFree(a); cudaFree(b); cudaFree(c); cudaFree(ref);
  if (ws) cudaFree(ws);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: check_hgemm manifest.csv\n");
    return 2;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device: nothing checked\n");
    return 77;
  }
  std::vector<Shape> shapes = ReadManifest(argv[1]);
  if (shapes.empty()) { std::fprintf(stderr, "no shapes in %s\n", argv[1]); return 2; }
  const bool table = anvil_hgemm_init() == ANVIL_HGEMM_OK && anvil_hgemm_status() == ANVIL_HGEMM_OK;
  std::printf("status: %s\n", anvil_hgemm_status_message());
  const size_t listed = shapes.size();
  for (size_t i = 0; i < listed && i < 4; ++i) {  // neighbours no table holds
    Shape s = shapes[i];
    s.m += 1; s.path = "cublas"; s.kernel = "";
    bool listed_too = false;
    for (size_t j = 0; j < listed; ++j) {
      const Shape& t = shapes[j];
      listed_too |= t.layout == s.layout && t.m == s.m && t.n == s.n && t.k == s.k;
    }
    if (!listed_too) shapes.push_back(s);
  }
  shapes.push_back({ANVIL_HGEMM_NT, 127, 255, 63, "cublas", ""});
  shapes.push_back({ANVIL_HGEMM_NN, 64, 96, 80, "cublas", ""});
  cublasHandle_t h;
  cublasCreate(&h);
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  int failed = 0;
  for (const Shape& s : shapes) {
    const char* name = nullptr;
    const int path = anvil_hgemm_dispatch(s.layout, s.m, s.n, s.k, &name);
    const std::string want = table ? s.path : "cublas";
    const bool in_table = table && path == ANVIL_HGEMM_PATH_KERNEL;
    bool ok = name != nullptr && (in_table ? want == "kernel" && s.kernel == name : want == name);
    if (!ok) std::printf("  dispatch: %s, manifest says %s %s\n", name ? name : "?", want.c_str(), s.kernel.c_str());
    ok = Check(h, s, stream) && ok;
    std::printf("%-6s %dx%dx%d %s -> %s\n", ok ? "ok" : "FAILED", s.m, s.n, s.k,
                s.layout == ANVIL_HGEMM_NT ? "nt" : "nn", name ? name : "?");
    failed += ok ? 0 : 1;
  }
  std::printf("%d of %zu shapes failed\n", failed, shapes.size());
  return failed == 0 ? 0 : 1;
}
