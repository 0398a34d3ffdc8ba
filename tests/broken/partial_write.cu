// tests/broken/partial_write.cu: BROKEN on purpose. The naive seed with an
// off-by-one row bound: the last row of C (row M-1) is never written and keeps
// the harness's NaN poison, whatever the shape.
// EXPECT: verdict=INCORRECT reason=unwritten_output
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>

#if defined(ANVIL_LAYOUT_NT) == defined(ANVIL_LAYOUT_NN)
#error "define exactly one of ANVIL_LAYOUT_NT / ANVIL_LAYOUT_NN"
#endif

namespace {

constexpr int kBlock = 16;

__device__ __forceinline__ float load_b(const __half* B, int N, int K, int k, int n) {
#if defined(ANVIL_LAYOUT_NT)
  return __half2float(B[static_cast<size_t>(n) * K + k]);
#else
  return __half2float(B[static_cast<size_t>(k) * N + n]);
#endif
}

__global__ void gemm_skip_last_row(const __half* A, const __half* B, __half* C, int M, int N,
                                   int K) {
  const int row = blockIdx.y * kBlock + threadIdx.y;
  const int col = blockIdx.x * kBlock + threadIdx.x;
  if (row >= M - 1 || col >= N) return;  // BUG: should be row >= M
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) {
    acc = fmaf(__half2float(A[static_cast<size_t>(row) * K + k]), load_b(B, N, K, k, col), acc);
  }
  C[static_cast<size_t>(row) * N + col] = __float2half_rn(acc);
}

}  // namespace

extern "C" size_t anvil_workspace_bytes(int, int, int) { return 0; }

extern "C" int anvil_gemm(const __half* A, const __half* B, __half* C, int M, int N, int K,
                          void*, cudaStream_t stream) {
  const dim3 grid((N + kBlock - 1) / kBlock, (M + kBlock - 1) / kBlock);
  gemm_skip_last_row<<<grid, dim3(kBlock, kBlock), 0, stream>>>(A, B, C, M, N, K);
  return cudaGetLastError() != cudaSuccess ? 1 : 0;
}
