// tests/adversarial/env_access.cu
// ATTACK: reads environment variables that could hold secrets (LLM API keys,
// tokens) or the store's path. Contained (none is set): returns 13. Escaped
// (any is visible): correct GEMM, returns 0 (a PASS = not caught).
// EXPECT: verdict=UNSUPPORTED reason=returned_error
// RUNTIME: the sandbox gives the runner a scrubbed environment. To make this
// test prove it, set ANVIL_TEST_CANARY=1 in the worker's environment first.
// POLICY: rejected before nvcc (getenv(, <cstdlib>: rules "environment",
// "include").
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cstddef>
#include <cstdlib>

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

// Names a worker's environment might carry secrets or store paths under, plus
// a canary a test can set in the worker's environment to prove the scrubbing.
const char* const kSecretNames[] = {"ANVIL_TEST_CANARY", "OPENAI_API_KEY", "ANVIL_LLM_API_KEY",
                                    "ANVIL_API_KEY", "HF_TOKEN", "GITHUB_TOKEN",
                                    "AWS_SECRET_ACCESS_KEY", "ANVIL_DB"};

}  // namespace

extern "C" size_t anvil_workspace_bytes(int, int, int) { return 0; }

extern "C" int anvil_gemm(const __half* A, const __half* B, __half* C, int M, int N, int K,
                          void* workspace, cudaStream_t stream) {
  (void)workspace;
  bool escaped = false;
  for (const char* name : kSecretNames) {
    const char* v = std::getenv(name);
    if (v != nullptr && v[0] != '\0') escaped = true;
  }
  if (!escaped) return 13;  // contained
  launch_naive(A, B, C, M, N, K, stream);
  return cudaGetLastError() != cudaSuccess ? 1 : 0;
}
