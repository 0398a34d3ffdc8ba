// A small, correct candidate in the ABI of docs/DESIGN.md ("A candidate"): a
// naive HGEMM of layout nt that compiles in seconds. Its -DANVIL_SCALE knob
// (default 1) scales C, so tests can make distinct builds of one source.
#ifndef ANVIL_TESTS_NAIVE_KERNEL_H_
#define ANVIL_TESTS_NAIVE_KERNEL_H_

namespace anvil::testing {

inline constexpr char kNaiveKernel[] = R"(
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#ifndef ANVIL_SCALE
#define ANVIL_SCALE 1
#endif
__global__ void gemm(const __half* A, const __half* B, __half* C, int M, int N, int K) {
  int r = blockIdx.y * blockDim.y + threadIdx.y, c = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= M || c >= N) return;
  float acc = 0;
  for (int k = 0; k < K; ++k) acc += __half2float(A[r * K + k]) * __half2float(B[c * K + k]);
  C[r * N + c] = __float2half(acc * ANVIL_SCALE);
}
extern "C" size_t anvil_workspace_bytes(int, int, int) { return 0; }
extern "C" int anvil_gemm(const __half* A, const __half* B, __half* C, int M, int N, int K,
                          void*, cudaStream_t s) {
  dim3 block(16, 16), grid((N + 15) / 16, (M + 15) / 16);
  gemm<<<grid, block, 0, s>>>(A, B, C, M, N, K);
  return cudaGetLastError() != cudaSuccess;
}
)";

}  // namespace anvil::testing

#endif  // ANVIL_TESTS_NAIVE_KERNEL_H_
