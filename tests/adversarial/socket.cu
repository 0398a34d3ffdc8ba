// tests/adversarial/socket.cu
// ATTACK: opens a network socket from anvil_gemm (the first step of sending
// inputs, outputs or timings anywhere). Contained (socket() fails): returns
// 11. Escaped: closes it, computes a correct GEMM and returns 0 (a PASS = not
// caught).
// EXPECT: verdict=UNSUPPORTED reason=returned_error
// RUNTIME: seccomp answers socket/connect/bind/... with EPERM; the runner's own
// network namespace has only loopback besides.
// POLICY: rejected before nvcc (socket(, <sys/socket.h>: rules "socket",
// "include").
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cstddef>
#include <netinet/in.h>
#include <sys/socket.h>
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
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 11;  // contained
  close(fd);
  launch_naive(A, B, C, M, N, K, stream);
  return cudaGetLastError() != cudaSuccess ? 1 : 0;
}
