// seeds/01_naive/kernel.cu: the slow, obviously-correct baseline HGEMM.
//
// One thread computes one element of C with a plain fp32 dot product over K,
// reading A and B straight from global memory (no shared memory, no tensor
// cores). It exists as a reference-quality candidate for the harness and as the
// base the broken/adversarial test candidates are cut from; it is not meant to
// be fast.
//
// Layout (exactly one, chosen by the builder):
//   ANVIL_LAYOUT_NT: A row-major MxK, B row-major NxK, C = A * B^T
//   ANVIL_LAYOUT_NN: A row-major MxK, B row-major KxN, C = A * B
// C is row-major MxN, fp16; accumulation is fp32.
//
// Knobs:
//   ANVIL_BLOCK  threads per block side; a block is BLOCK x BLOCK threads and
//                covers a BLOCK x BLOCK tile of C. 8..32 (32*32 = 1024 is the
//                CUDA limit on threads per block).
//
// Any M, N, K >= 1 works: every thread checks its own (row, col) bound; rows
// past gridDim.y * BLOCK are covered by a grid-stride loop, so no grid limit
// caps M. No workspace.

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#if defined(ANVIL_LAYOUT_NT) && defined(ANVIL_LAYOUT_NN)
#error "define exactly one of ANVIL_LAYOUT_NT / ANVIL_LAYOUT_NN"
#endif
#if !defined(ANVIL_LAYOUT_NT) && !defined(ANVIL_LAYOUT_NN)
#error "define exactly one of ANVIL_LAYOUT_NT / ANVIL_LAYOUT_NN"
#endif

#ifndef ANVIL_BLOCK
#define ANVIL_BLOCK 16
#endif

static_assert(ANVIL_BLOCK >= 8 && ANVIL_BLOCK <= 32,
              "ANVIL_BLOCK: 8..32 (BLOCK^2 threads must not exceed 1024)");

namespace {

constexpr int kBlock = ANVIL_BLOCK;

// B(k, n) for the compiled layout.
__device__ __forceinline__ float load_b(const __half* B, int N, int K, int k,
                                        int n) {
#if defined(ANVIL_LAYOUT_NT)
  (void)N;
  return __half2float(B[static_cast<size_t>(n) * K + k]);  // B is N x K
#else
  (void)K;
  return __half2float(B[static_cast<size_t>(k) * N + n]);  // B is K x N
#endif
}

__global__ void __launch_bounds__(kBlock* kBlock)
    naive_gemm(const __half* __restrict__ A, const __half* __restrict__ B,
               __half* __restrict__ C, int M, int N, int K) {
  const int col = blockIdx.x * kBlock + threadIdx.x;
  if (col >= N) return;
  for (int row = blockIdx.y * kBlock + threadIdx.y; row < M;
       row += gridDim.y * kBlock) {
    const __half* a_row = A + static_cast<size_t>(row) * K;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) {
      acc = fmaf(__half2float(a_row[k]), load_b(B, N, K, k, col), acc);
    }
    C[static_cast<size_t>(row) * N + col] = __float2half_rn(acc);
  }
}

}  // namespace

extern "C" size_t anvil_workspace_bytes(int M, int N, int K) {
  (void)M;
  (void)N;
  (void)K;
  return 0;
}

extern "C" int anvil_gemm(const __half* A, const __half* B, __half* C, int M,
                          int N, int K, void* workspace, cudaStream_t stream) {
  (void)workspace;
  if (M < 1 || N < 1 || K < 1) return 1;
  const unsigned grid_x = static_cast<unsigned>((N + kBlock - 1) / kBlock);
  const int tiles_m = (M + kBlock - 1) / kBlock;
  const unsigned grid_y = static_cast<unsigned>(tiles_m < 65535 ? tiles_m : 65535);
  naive_gemm<<<dim3(grid_x, grid_y), dim3(kBlock, kBlock), 0, stream>>>(
      A, B, C, M, N, K);
  return cudaGetLastError() != cudaSuccess ? 1 : 0;
}
