// tests/adversarial/reuse_output.cu
// ATTACK: output caching keyed on the call's pointers and shape. It computes
// honestly while it is being checked (the first 4 calls with the same
// arguments: the runner's correctness phase), then, whenever the arguments
// repeat, launches only an empty kernel (so the call still shows GPU work on
// the right stream) and leaves C as it is, assuming nobody changed the inputs.
// The runner regenerates inputs and re-poisons C before every timed call and
// checks one timed output per round.
// EXPECT: verdict=INCORRECT reason=timed_output_mismatch
// (Without the empty kernel: CHEAT no_gpu_work. A variant that skips on the
// very first repeat fails the correctness phase instead: unwritten_output.)
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

__global__ void empty_kernel() {}

struct Key {
  const void* a;
  const void* b;
  void* c;
  int m, n, k;
  bool operator==(const Key& o) const {
    return a == o.a && b == o.b && c == o.c && m == o.m && n == o.n && k == o.k;
  }
};
Key last_key{};
int repeats = 0;
constexpr int kHonestRepeats = 4;

}  // namespace

extern "C" size_t anvil_workspace_bytes(int, int, int) { return 0; }

extern "C" int anvil_gemm(const __half* A, const __half* B, __half* C, int M, int N, int K,
                          void* workspace, cudaStream_t stream) {
  (void)workspace;
  const Key key{A, B, C, M, N, K};
  repeats = key == last_key ? repeats + 1 : 0;
  last_key = key;
  if (repeats >= kHonestRepeats) {
    empty_kernel<<<1, 1, 0, stream>>>();  // the attack: "C is still valid"
  } else {
    launch_naive(A, B, C, M, N, K, stream);
  }
  return cudaGetLastError() != cudaSuccess ? 1 : 0;
}
