// For the standalone benchmarks in this folder that call cuBLAS or cuBLASLt on
// fp16 operands (each one file and one target): LT_CHECK, a cuBLAS call
// that must succeed, and FillHalf, uniform values in [-1, 1) from a hash of the
// index and a seed (never zeros: they run faster than real data).
#ifndef ANVIL_BENCH_LT_UTIL_H_
#define ANVIL_BENCH_LT_UTIL_H_

#include <cublas_api.h>
#include <cuda_fp16.h>

#include <cstdio>
#include <cstdlib>

#define LT_CHECK(x)                                                             \
  do {                                                                          \
    cublasStatus_t st_ = (x);                                                   \
    if (st_ != CUBLAS_STATUS_SUCCESS) {                                         \
      std::fprintf(stderr, "%s:%d %s: %d\n", __FILE__, __LINE__, #x, int(st_)); \
      std::exit(1);                                                             \
    }                                                                           \
  } while (0)

__global__ void FillHalf(__half* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    unsigned x = unsigned(i) * 2654435761u ^ seed;
    x ^= x >> 13;
    x *= 0x5bd1e995u;
    x ^= x >> 15;
    p[i] = __float2half((x & 0xffff) / 32768.0f - 1.0f);
  }
}

#endif  // ANVIL_BENCH_LT_UTIL_H_
