// tests/adversarial/static_buffer.cu
// ATTACK: keeps a __device__ copy of a previous result and serves it whenever
// the shape matches. It computes (and saves) honestly for the first 4 calls of
// a shape (the runner's correctness phase), then only copies the saved C into
// the output: a cheap device-to-device copy that looks like real GPU work on
// the right stream, with stale values.
// EXPECT: verdict=INCORRECT reason=timed_output_mismatch
// (A variant that serves the copy from the second call on fails the
// correctness phase instead: wrong_result.)
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

constexpr size_t kCapacity = size_t(1) << 22;  // halfs kept (8 MiB)
__device__ __half saved[kCapacity];

__global__ void copy_halfs(__half* dst, const __half* src, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    dst[i] = src[i];
}

int saved_m = 0, saved_n = 0, saved_k = 0, calls_for_shape = 0;
constexpr int kHonestCalls = 4;

}  // namespace

extern "C" size_t anvil_workspace_bytes(int, int, int) { return 0; }

extern "C" int anvil_gemm(const __half* A, const __half* B, __half* C, int M, int N, int K,
                          void* workspace, cudaStream_t stream) {
  (void)workspace;
  const size_t n = size_t(M) * N;
  __half* saved_ptr = nullptr;
  if (cudaGetSymbolAddress(reinterpret_cast<void**>(&saved_ptr), saved) != cudaSuccess) return 1;
  const bool same_shape = M == saved_m && N == saved_n && K == saved_k;
  calls_for_shape = same_shape ? calls_for_shape + 1 : 1;
  saved_m = M, saved_n = N, saved_k = K;
  const unsigned blocks = unsigned(n / 256 + 1 < 1024 ? n / 256 + 1 : 1024);
  if (n <= kCapacity && calls_for_shape > kHonestCalls) {
    copy_halfs<<<blocks, 256, 0, stream>>>(C, saved_ptr, n);  // the attack: stale result
  } else {
    launch_naive(A, B, C, M, N, K, stream);
    if (n <= kCapacity) copy_halfs<<<blocks, 256, 0, stream>>>(saved_ptr, C, n);
  }
  return cudaGetLastError() != cudaSuccess ? 1 : 0;
}
