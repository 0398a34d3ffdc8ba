// What a process's earlier work does to the launch gap between back-to-back
// kernels in a CUDA graph. The probe: a graph of 400 cublasGemmEx calls on one
// operand set (short shape, no programmatic dependent launch), replayed once
// untimed and 5 times between two events; time per call = elapsed / 2000.
// Each scenario runs in its own child process (the state it leaves is the
// context's), probing before its steps, after them, and after 200 ms of
// back-to-back replays (the GPU's launch path speeds up under sustained load).
//   build/bin/bench/anvil-launch-gap [--m 256 --n 128 --k 128]
// On the H100 (bench/results/2026-11-27-launch-gap-h100.md) a large copy,
// then work on a second stream, left every later graph launch about 0.17 us
// slower, persistently; the same work on the graph's own stream did not.
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cuda_check.h"
#include "lt_util.h"

namespace {

int g_m = 256, g_n = 128, g_k = 128;

struct Process {
  cublasHandle_t blas = nullptr;
  cudaStream_t main = nullptr, side = nullptr;
  __half *a = nullptr, *b = nullptr, *c = nullptr;
  char* scratch = nullptr;  // the memsets' target
  cudaGraphExec_t graph = nullptr;
};

double NowMs() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

void Gemm(Process& p) {
  const float one = 1, zero = 0;
  LT_CHECK(cublasGemmEx(
      p.blas, CUBLAS_OP_N, CUBLAS_OP_N, g_n, g_m, g_k, &one, p.b, CUDA_R_16F, g_n, p.a, CUDA_R_16F,
      g_k, &zero, p.c, CUDA_R_16F, g_n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void Capture(Process& p) {
  cudaGraph_t g;
  CHECK(cudaStreamBeginCapture(p.main, cudaStreamCaptureModeGlobal));
  for (int j = 0; j < 400; ++j) Gemm(p);
  CHECK(cudaStreamEndCapture(p.main, &g));
  CHECK(cudaGraphInstantiate(&p.graph, g, 0));
  CHECK(cudaGraphDestroy(g));
}

double Probe(Process& p) {
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  CHECK(cudaGraphLaunch(p.graph, p.main));
  CHECK(cudaEventRecord(e0, p.main));
  for (int r = 0; r < 5; ++r) CHECK(cudaGraphLaunch(p.graph, p.main));
  CHECK(cudaEventRecord(e1, p.main));
  CHECK(cudaEventSynchronize(e1));
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, e0, e1));
  CHECK(cudaEventDestroy(e0));
  CHECK(cudaEventDestroy(e1));
  return ms * 1e3 / 2000;
}

void Busy(Process& p, double ms) {
  const double until = NowMs() + ms;
  while (NowMs() < until) {
    for (int r = 0; r < 4; ++r) CHECK(cudaGraphLaunch(p.graph, p.main));
    CHECK(cudaStreamSynchronize(p.main));
  }
}

__global__ void Touch(char* p, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = 1;
}

// The steps a scenario is made of.
void Step(Process& p, const std::string& step) {
  constexpr size_t kBig = 512ull << 20, kSmall = 64 << 10;
  if (step == "big-copy" || step == "main-big-copy") {  // the runner's copy ceiling as it was
    char *src, *dst;
    CHECK(cudaMalloc(&src, kBig));
    CHECK(cudaMalloc(&dst, kBig));
    if (step == "big-copy") CHECK(cudaMemset(src, 1, kBig));  // the legacy default stream
    else CHECK(cudaMemsetAsync(src, 1, kBig, p.main));
    for (int r = 0; r < 8; ++r) CHECK(cudaMemcpyAsync(dst, src, kBig, cudaMemcpyDeviceToDevice, p.main));
  } else if (step == "new-side") {
    CHECK(cudaStreamCreateWithFlags(&p.side, cudaStreamNonBlocking));
  } else if (step == "side-memset" || step == "main-memset") {
    for (int i = 0; i < 24; ++i) {
      CHECK(cudaMemsetAsync(p.scratch + i * kSmall, 0xA5, kSmall,
                            step == "side-memset" ? p.side : p.main));
    }
  } else if (step == "side-kernel") {
    Touch<<<256, 256, 0, p.side>>>(p.scratch, int(kSmall));
    CHECK(cudaGetLastError());
  }
  CHECK(cudaDeviceSynchronize());
}

void RunScenario(const std::string& name, const std::vector<std::string>& steps) {
  Process p;
  CHECK(cudaSetDevice(0));
  CHECK(cudaStreamCreateWithFlags(&p.main, cudaStreamNonBlocking));
  LT_CHECK(cublasCreate(&p.blas));
  LT_CHECK(cublasSetStream(p.blas, p.main));
  CHECK(cudaMalloc(&p.a, size_t(g_m) * g_k * 2));
  CHECK(cudaMalloc(&p.b, size_t(g_n) * g_k * 2));
  CHECK(cudaMalloc(&p.c, size_t(g_m) * g_n * 2));
  CHECK(cudaMalloc(&p.scratch, 2 << 20));
  CHECK(cudaMemsetAsync(p.a, 0x3c, size_t(g_m) * g_k * 2, p.main));  // 1.0
  CHECK(cudaMemsetAsync(p.b, 0x3c, size_t(g_n) * g_k * 2, p.main));
  CHECK(cudaStreamSynchronize(p.main));
  Capture(p);
  const double before = Probe(p);
  std::string what;
  for (const std::string& s : steps) Step(p, s), what += (what.empty() ? "" : ", ") + s;
  const double after = Probe(p);
  Busy(p, 200);
  const double sustained = Probe(p);
  std::printf("%-26s %-40s %8.3f %8.3f %10.3f\n", name.c_str(), what.empty() ? "-" : what.c_str(),
              before, after, sustained);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("Launch gap of back-to-back cuBLAS calls in a CUDA graph after a process's earlier work");
  app.add_option("--m", g_m, "M of the probe's GEMM (row-major C = A * B, nn)");
  app.add_option("--n", g_n, "N");
  app.add_option("--k", g_k, "K");
  CLI11_PARSE(app, argc, argv);
  const std::vector<std::pair<std::string, std::vector<std::string>>> scenarios = {
      {"nothing", {}},
      {"big copy only", {"big-copy"}},
      {"second stream only", {"new-side", "side-memset"}},
      {"copy, then second stream", {"big-copy", "new-side", "side-memset"}},
      {"  same, a kernel there", {"big-copy", "new-side", "side-kernel"}},
      {"  same, memsets on main", {"big-copy", "new-side", "main-memset"}},
      {"  same, copy all on main", {"main-big-copy", "new-side", "side-memset"}},
      {"second stream, then copy", {"new-side", "big-copy", "side-memset"}},
  };
  std::printf("%dx%dx%d nn, us per call in a graph of 400 cublasGemmEx calls\n", g_m, g_n, g_k);
  std::printf("%-26s %-40s %8s %8s %10s\n", "scenario", "steps after the first probe", "before",
              "after", "+200ms busy");
  std::fflush(stdout);
  int failed = 0;
  for (const auto& [name, steps] : scenarios) {
    const pid_t pid = fork();
    if (pid == 0) {
      RunScenario(name, steps);
      std::fflush(stdout);
      _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    failed += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  return failed ? 1 : 0;
}
