// CHECK(call): a CUDA runtime call that must succeed, for the standalone
// benchmarks in this folder (each one file and one target): on an error
// it prints the call and the error and exits.
#ifndef ANVIL_BENCH_CUDA_CHECK_H_
#define ANVIL_BENCH_CUDA_CHECK_H_

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CHECK(x)                                                   \
  do {                                                             \
    cudaError_t e = (x);                                           \
    if (e != cudaSuccess) {                                        \
      std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e)); \
      std::exit(1);                                                \
    }                                                              \
  } while (0)

#endif  // ANVIL_BENCH_CUDA_CHECK_H_
