// tests/adversarial/fork_exec.cu
// ATTACK: starts processes from anvil_gemm: fork() (the child exits at once)
// and system("true") (fork + exec of a shell). A process outside the runner
// could outlive it, reach the network or the disk, or do GPU work nobody times.
// When neither works (contained) the candidate says so by returning 10; when
// either works it computes a correct GEMM and returns 0, so an escape shows up
// as a PASS the harness test reports as "not caught".
// EXPECT: verdict=UNSUPPORTED reason=returned_error
// RUNTIME: the runner's seccomp filter answers fork/vfork/execve and
// non-thread clone with EPERM, so both attempts fail and the call returns 10.
// POLICY: rejected before nvcc (fork(, system(, _exit(, <unistd.h>: rules
// "process", "include").
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cstddef>
#include <cstdlib>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(ANVIL_LAYOUT_NT) == defined(ANVIL_LAYOUT_NN)
#error "define exactly one of ANVIL_LAYOUT_NT / ANVIL_LAYOUT_NN"
#endif

namespace {

// ---- a correct naive GEMM (the 01_naive seed); only the attack differs ----
constexpr int kBlock = 16;

__device__ __forceinline__ float load_b(const __half* B, int N, int K, int k, int n) {
#if defined(ANVIL_LAYOUT_NT)
  return __half2float(B[static_cast<size_t>(n) * K + k]);
#else
  return __half2float(B[static_cast<size_t>(k) * N + n]);
#endif
}

__global__ void naive_gemm(const __half* A, const __half* B, __half* C, int M, int N, int K) {
  const int row = blockIdx.y * kBlock + threadIdx.y;
  const int col = blockIdx.x * kBlock + threadIdx.x;
  if (row >= M || col >= N) return;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) {
    acc = fmaf(__half2float(A[static_cast<size_t>(row) * K + k]), load_b(B, N, K, k, col), acc);
  }
  C[static_cast<size_t>(row) * N + col] = __float2half_rn(acc);
}

void launch_naive(const __half* A, const __half* B, __half* C, int M, int N, int K,
                  cudaStream_t stream) {
  const dim3 grid((N + kBlock - 1) / kBlock, (M + kBlock - 1) / kBlock);
  naive_gemm<<<grid, dim3(kBlock, kBlock), 0, stream>>>(A, B, C, M, N, K);
}


}  // namespace

extern "C" size_t anvil_workspace_bytes(int, int, int) { return 0; }

extern "C" int anvil_gemm(const __half* A, const __half* B, __half* C, int M, int N, int K,
                          void* workspace, cudaStream_t stream) {
  (void)workspace;
  bool escaped = false;
  const pid_t pid = fork();
  if (pid == 0) _exit(0);  // the child: leave at once
  if (pid > 0) {
    waitpid(pid, nullptr, 0);
    escaped = true;
  }
  if (std::system("true") == 0) escaped = true;
  if (!escaped) return 10;  // contained
  launch_naive(A, B, C, M, N, K, stream);
  return cudaGetLastError() != cudaSuccess ? 1 : 0;
}
