// tests/broken/wrong_tail.cu: BROKEN on purpose. The naive seed, but only the
// full BLOCK x BLOCK tiles of C are computed: rows >= (M / 16) * 16 and cols
// >= (N / 16) * 16 are never written, so every shape that is not a multiple of
// the tile leaves NaN-poisoned elements behind (the harness shape 130x200x72
// leaves rows 128-129 and cols 192-199).
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

__global__ void gemm_full_tiles_only(const __half* A, const __half* B, __half* C, int M, int N,
                                     int K) {
  const int row = blockIdx.y * kBlock + threadIdx.y;
  const int col = blockIdx.x * kBlock + threadIdx.x;
  // BUG: the tail tiles are skipped instead of bounds-checked.
  const int m_full = M / kBlock * kBlock;
  const int n_full = N / kBlock * kBlock;
  if (row >= m_full || col >= n_full) return;
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
  gemm_full_tiles_only<<<grid, dim3(kBlock, kBlock), 0, stream>>>(A, B, C, M, N, K);
  return cudaGetLastError() != cudaSuccess ? 1 : 0;
}
