// tests/adversarial/special_inputs.cu
// ATTACK: input sniffing. A one-block kernel inspects the first 256 elements
// of A (when A has that many); when they are all small integers (the kind of
// inputs an exact check uses), a flag switches the GEMM to a "cheap path" that
// only sums the first half of K. Random normal inputs never trip it, so the
// ordinary accuracy check passes; the exact small-integer check must catch it.
// EXPECT: verdict=INCORRECT reason=exact_mismatch|wrong_result|fp16_accumulation
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

__device__ int cheap_path;

__global__ void sniff_inputs(const __half* A, size_t n) {
  __shared__ int all_small_ints;
  if (threadIdx.x == 0) all_small_ints = 1;
  __syncthreads();
  const size_t i = threadIdx.x;
  if (i < n) {
    const float v = __half2float(A[i]);
    if (v != rintf(v) || fabsf(v) > 64.0f) atomicAnd(&all_small_ints, 0);
  }
  __syncthreads();
  if (threadIdx.x == 0) cheap_path = all_small_ints;
}

__global__ void gemm_with_shortcut(const __half* A, const __half* B, __half* C, int M, int N,
                                   int K) {
  const int row = blockIdx.y * kBlock + threadIdx.y;
  const int col = blockIdx.x * kBlock + threadIdx.x;
  if (row >= M || col >= N) return;
  const int k_end = cheap_path ? (K + 1) / 2 : K;  // the attack
  float acc = 0.0f;
  for (int k = 0; k < k_end; ++k) {
    acc = fmaf(__half2float(A[static_cast<size_t>(row) * K + k]), load_b(B, N, K, k, col), acc);
  }
  C[static_cast<size_t>(row) * N + col] = __float2half_rn(acc);
}

}  // namespace

extern "C" size_t anvil_workspace_bytes(int, int, int) { return 0; }

extern "C" int anvil_gemm(const __half* A, const __half* B, __half* C, int M, int N, int K,
                          void* workspace, cudaStream_t stream) {
  (void)workspace;
  if (size_t(M) * K < 256) {  // too few elements to sniff: behave
    launch_naive(A, B, C, M, N, K, stream);
    return cudaGetLastError() != cudaSuccess ? 1 : 0;
  }
  sniff_inputs<<<1, 256, 0, stream>>>(A, size_t(M) * K);
  const dim3 grid((N + kBlock - 1) / kBlock, (M + kBlock - 1) / kBlock);
  gemm_with_shortcut<<<grid, dim3(kBlock, kBlock), 0, stream>>>(A, B, C, M, N, K);
  return cudaGetLastError() != cudaSuccess ? 1 : 0;
}
