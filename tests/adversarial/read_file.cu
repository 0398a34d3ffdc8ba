// tests/adversarial/read_file.cu
// ATTACK: reads files outside its scratch directory: host files the sandbox
// does not expose (/etc/hostname, /etc/machine-id: harmless canaries that
// exist on almost every Linux host) and the SQLite store (./anvil.db and the
// same name up to three directories higher), where other candidates, results
// and prompts live. Contained (none can be opened and read): returns 12.
// Escaped: correct GEMM, returns 0 (a PASS = not caught). /etc/passwd is not
// used: the namespace sandbox binds it on purpose (user lookups).
// EXPECT: verdict=UNSUPPORTED reason=returned_error
// RUNTIME: the namespace sandbox shows the runner /usr, the libraries, a few
// /etc files, the driver and its scratch directory only; without namespaces
// (isolation "none") the canaries are readable and this fixture PASSes, which
// the test reports.
// POLICY: rejected before nvcc (fopen(: rule "file_io").
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cstddef>
#include <cstdio>

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

bool readable(const char* path) {
  FILE* f = fopen(path, "rb");
  if (f == nullptr) return false;
  char buf[64];
  const size_t n = fread(buf, 1, sizeof(buf), f);
  fclose(f);
  return n > 0;
}

}  // namespace

extern "C" size_t anvil_workspace_bytes(int, int, int) { return 0; }

extern "C" int anvil_gemm(const __half* A, const __half* B, __half* C, int M, int N, int K,
                          void* workspace, cudaStream_t stream) {
  (void)workspace;
  const char* const paths[] = {"/etc/hostname", "/etc/machine-id", "anvil.db", "../anvil.db",
                               "../../anvil.db", "../../../anvil.db"};
  bool escaped = false;
  for (const char* p : paths) escaped = readable(p) || escaped;
  if (!escaped) return 12;  // contained
  launch_naive(A, B, C, M, N, K, stream);
  return cudaGetLastError() != cudaSuccess ? 1 : 0;
}
