// A plain cuBLAS timing loop, independent of the harness, to cross-check the
// harness's cuBLAS figures: cublasGemmEx (fp16 in, fp32 compute, fp16 out),
// warm-up, then back-to-back calls timed with events (the "warm" figure).
//   nvcc -O2 -o plain_cublas plain_cublas.cu -lcublas
//   ./plain_cublas M N K nt|nn
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "lt_util.h"

int main(int argc, char** argv) {
  if (argc != 5) { std::fprintf(stderr, "usage: plain_cublas M N K nt|nn\n"); return 2; }
  int m = std::atoi(argv[1]), n = std::atoi(argv[2]), k = std::atoi(argv[3]);
  bool nt = std::strcmp(argv[4], "nt") == 0;
  __half *a, *b, *c;
  cudaMalloc(&a, size_t(m) * k * 2); cudaMalloc(&b, size_t(n) * k * 2); cudaMalloc(&c, size_t(m) * n * 2);
  FillHalf<<<1024, 256>>>(a, size_t(m) * k, 1); FillHalf<<<1024, 256>>>(b, size_t(n) * k, 2);
  cublasHandle_t h; cublasCreate(&h);
  float alpha = 1, beta = 0;
  auto call = [&] {
    cublasGemmEx(h, nt ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha, b, CUDA_R_16F,
                 nt ? k : n, a, CUDA_R_16F, k, &beta, c, CUDA_R_16F, n, CUBLAS_COMPUTE_32F,
                 CUBLAS_GEMM_DEFAULT);
  };
  for (int i = 0; i < 50; ++i) call();
  cudaDeviceSynchronize();
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  std::vector<float> per_call;
  for (int r = 0; r < 15; ++r) {
    cudaEventRecord(e0);
    for (int i = 0; i < 20; ++i) call();
    cudaEventRecord(e1); cudaEventSynchronize(e1);
    float ms; cudaEventElapsedTime(&ms, e0, e1);
    per_call.push_back(ms * 1000 / 20);
  }
  std::sort(per_call.begin(), per_call.end());
  std::printf("plain_cublas %dx%dx%d %s warm_us %.2f (min %.2f)\n", m, n, k, argv[4],
              per_call[per_call.size() / 2], per_call[0]);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
