// tests/adversarial/fork_exec_evasive.cu
// ATTACK: fork_exec.cu written to slip past the source policy: fork and _exit
// are declared through function types and called through pointers (the names
// are never followed by "("), and no OS header is included. Contained: returns
// 10. Escaped: computes a correct GEMM and returns 0 (a PASS = not caught).
// EXPECT: verdict=UNSUPPORTED reason=returned_error
// RUNTIME: seccomp answers fork (and clone without CLONE_THREAD) with EPERM.
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cstddef>

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

using ForkFn = int();
using ExitFn = void(int);
}  // namespace
extern "C" ForkFn fork;
extern "C" ExitFn _exit;
extern "C" int waitpid(int, int*, int);
namespace {

}  // namespace

extern "C" size_t anvil_workspace_bytes(int, int, int) { return 0; }

extern "C" int anvil_gemm(const __half* A, const __half* B, __half* C, int M, int N, int K,
                          void* workspace, cudaStream_t stream) {
  (void)workspace;
  ForkFn* start_process = fork;
  ExitFn* leave = _exit;
  const int pid = start_process();
  if (pid == 0) leave(0);  // the child: leave at once
  if (pid < 0) return 10;  // contained
  waitpid(pid, nullptr, 0);
  launch_naive(A, B, C, M, N, K, stream);
  return cudaGetLastError() != cudaSuccess ? 1 : 0;
}
