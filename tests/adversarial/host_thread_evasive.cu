// tests/adversarial/host_thread_evasive.cu
// ATTACK: host_thread.cu written to slip past the source policy: pthread_create
// is declared through a function type and called through a pointer, so its
// name is never followed by "(" and no thread header is included. The thread
// launches the GEMM on the caller's stream and is joined before returning, so
// the result is correct and on time: only the runtime thread audit (CUDA calls
// from a thread other than the caller's) can catch it.
// EXPECT: verdict=CHEAT reason=host_thread
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

// pthread_t is unsigned long on Linux x86_64 and aarch64.
using ThreadStart = void*(void*);
using ThreadCreate = int(unsigned long*, const void*, ThreadStart*, void*);
}  // namespace
extern "C" ThreadCreate pthread_create;
extern "C" int pthread_join(unsigned long, void**);
namespace {

struct Job {
  const __half* A;
  const __half* B;
  __half* C;
  int M, N, K;
  cudaStream_t stream;
  int rc;
};

void* run_job(void* p) {
  Job* j = static_cast<Job*>(p);
  launch_naive(j->A, j->B, j->C, j->M, j->N, j->K, j->stream);
  j->rc = cudaGetLastError() != cudaSuccess ? 1 : 0;
  return nullptr;
}

}  // namespace

extern "C" size_t anvil_workspace_bytes(int, int, int) { return 0; }

extern "C" int anvil_gemm(const __half* A, const __half* B, __half* C, int M, int N, int K,
                          void* workspace, cudaStream_t stream) {
  (void)workspace;
  Job job{A, B, C, M, N, K, stream, 0};
  ThreadCreate* spawn = pthread_create;
  unsigned long tid = 0;
  if (spawn(&tid, nullptr, run_job, &job) != 0) {  // no thread: do it here
    launch_naive(A, B, C, M, N, K, stream);
    return cudaGetLastError() != cudaSuccess ? 1 : 0;
  }
  pthread_join(tid, nullptr);
  return job.rc;
}
