// tests/adversarial/graph_launch_once.cu
// ATTACK: honest when called eagerly, but while its stream is being captured
// into a CUDA graph it computes only the first call of each capture and turns
// every later one into an empty kernel: a graph of N back-to-back calls on one
// operand set then does the work of one, and times as 1/N of a call, while
// its output (the first call's) is right. The runner watches the candidate's
// first replay in each graph regime with CUPTI and compares its GPU work with
// as many eager calls'.
// EXPECT: verdict=CHEAT reason=graph_skipped_work
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

unsigned long long last_capture = 0;

}  // namespace

extern "C" size_t anvil_workspace_bytes(int, int, int) { return 0; }

extern "C" int anvil_gemm(const __half* A, const __half* B, __half* C, int M, int N, int K,
                          void* workspace, cudaStream_t stream) {
  (void)workspace;
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  unsigned long long id = 0;
  if (cudaStreamGetCaptureInfo(stream, &status, &id) != cudaSuccess) return 1;
  if (status == cudaStreamCaptureStatusActive && id == last_capture) {
    empty_kernel<<<1, 1, 0, stream>>>();  // the attack: "the first call did it"
  } else {
    last_capture = status == cudaStreamCaptureStatusActive ? id : 0;
    launch_naive(A, B, C, M, N, K, stream);
  }
  return cudaGetLastError() != cudaSuccess ? 1 : 0;
}
