// tests/broken/missing_barrier.cu: BROKEN on purpose. A classic shared-memory
// tiled GEMM (16x16 tiles of A and B staged through one smem buffer) with the
// __syncthreads() after the inner product removed: a warp that finishes tile t
// starts overwriting the buffer with tile t+1 while other warps still read
// tile t. To make the race fire on every run instead of now and then, odd
// warps idle for ~20 us before their inner product (a stand-in for any skew
// between warps), so even warps have always refilled the buffer by then.
// Every tile but the last is corrupted for half the rows: finite, wrong values.
// EXPECT: verdict=INCORRECT reason=wrong_result
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>

#if defined(ANVIL_LAYOUT_NT) == defined(ANVIL_LAYOUT_NN)
#error "define exactly one of ANVIL_LAYOUT_NT / ANVIL_LAYOUT_NN"
#endif

namespace {

constexpr int kTile = 16;

__device__ __forceinline__ __half load_b(const __half* B, int N, int K, int k, int n) {
  if (k >= K || n >= N) return __float2half_rn(0.0f);
#if defined(ANVIL_LAYOUT_NT)
  return B[static_cast<size_t>(n) * K + k];
#else
  return B[static_cast<size_t>(k) * N + n];
#endif
}

__global__ void tiled_gemm_missing_barrier(const __half* A, const __half* B, __half* C, int M,
                                           int N, int K) {
  __shared__ float As[kTile][kTile];
  __shared__ float Bs[kTile][kTile];
  const int ty = threadIdx.y, tx = threadIdx.x;
  const int row = blockIdx.y * kTile + ty;
  const int col = blockIdx.x * kTile + tx;
  const int warp = (ty * kTile + tx) / 32;
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += kTile) {
    const int ka = k0 + tx, kb = k0 + ty;
    As[ty][tx] = (row < M && ka < K) ? __half2float(A[static_cast<size_t>(row) * K + ka]) : 0.0f;
    Bs[ty][tx] = __half2float(load_b(B, N, K, kb, col));
    __syncthreads();
    if (warp & 1) __nanosleep(20000);
    for (int k = 0; k < kTile; ++k) acc = fmaf(As[ty][k], Bs[k][tx], acc);
    // BUG: missing __syncthreads(); the next iteration overwrites As/Bs while
    // other warps may still be reading them.
  }
  if (row < M && col < N) C[static_cast<size_t>(row) * N + col] = __float2half_rn(acc);
}

}  // namespace

extern "C" size_t anvil_workspace_bytes(int, int, int) { return 0; }

extern "C" int anvil_gemm(const __half* A, const __half* B, __half* C, int M, int N, int K,
                          void*, cudaStream_t stream) {
  const dim3 grid((N + kTile - 1) / kTile, (M + kTile - 1) / kTile);
  tiled_gemm_missing_barrier<<<grid, dim3(kTile, kTile), 0, stream>>>(A, B, C, M, N, K);
  return cudaGetLastError() != cudaSuccess ? 1 : 0;
}
