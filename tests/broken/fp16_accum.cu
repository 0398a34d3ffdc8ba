// tests/broken/fp16_accum.cu: BROKEN on purpose. The naive seed accumulating
// in __half (__hfma) instead of fp32. On random normal inputs the rounding of
// every partial sum to 11 significant bits already exceeds the 3.5e-4 relative
// error budget at moderate K (wrong_result); if it slips under, the
// large-sums probe (integer inputs whose partial sums pass 2048, where fp16
// stops representing every integer) fails it (fp16_accumulation).
// EXPECT: verdict=INCORRECT reason=wrong_result|fp16_accumulation|exact_mismatch
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>

#if defined(ANVIL_LAYOUT_NT) == defined(ANVIL_LAYOUT_NN)
#error "define exactly one of ANVIL_LAYOUT_NT / ANVIL_LAYOUT_NN"
#endif

namespace {

constexpr int kBlock = 16;

__device__ __forceinline__ __half load_b(const __half* B, int N, int K, int k, int n) {
#if defined(ANVIL_LAYOUT_NT)
  return B[static_cast<size_t>(n) * K + k];
#else
  return B[static_cast<size_t>(k) * N + n];
#endif
}

__global__ void gemm_fp16_accumulate(const __half* A, const __half* B, __half* C, int M, int N,
                                     int K) {
  const int row = blockIdx.y * kBlock + threadIdx.y;
  const int col = blockIdx.x * kBlock + threadIdx.x;
  if (row >= M || col >= N) return;
  __half acc = __float2half_rn(0.0f);  // BUG: fp16 accumulator
  for (int k = 0; k < K; ++k) {
    acc = __hfma(A[static_cast<size_t>(row) * K + k], load_b(B, N, K, k, col), acc);
  }
  C[static_cast<size_t>(row) * N + col] = acc;
}

}  // namespace

extern "C" size_t anvil_workspace_bytes(int, int, int) { return 0; }

extern "C" int anvil_gemm(const __half* A, const __half* B, __half* C, int M, int N, int K,
                          void*, cudaStream_t stream) {
  const dim3 grid((N + kBlock - 1) / kBlock, (M + kBlock - 1) / kBlock);
  gemm_fp16_accumulate<<<grid, dim3(kBlock, kBlock), 0, stream>>>(A, B, C, M, N, K);
  return cudaGetLastError() != cudaSuccess ? 1 : 0;
}
