// A plain cuBLAS timing loop, independent of the harness, to cross-check the
// harness's cuBLAS figures: cublasGemmEx (fp16 in, fp32 compute, fp16 out),
// warm-up, then back-to-back calls timed with events (the "warm" figure).
//   build/bin/bench/anvil-plain-cublas --shape MxNxK [--layout nt|nn]
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "cuda_check.h"
#include "lt_util.h"
#include "probe_args.h"

int main(int argc, char** argv) {
  CLI::App app{"plain_cublas: cublasGemmEx in a plain warm loop, to cross-check the harness's cuBLAS figure"};
  ProbeShape shape;
  std::string layout = "nt";
  AddShapeOption(app, &shape);
  AddLayoutOption(app, &layout);
  CLI11_PARSE(app, argc, argv);
  const int m = shape.m, n = shape.n, k = shape.k;
  const bool nt = layout == "nt";
  __half *a, *b, *c;
  CHECK(cudaMalloc(&a, size_t(m) * k * 2));
  CHECK(cudaMalloc(&b, size_t(n) * k * 2));
  CHECK(cudaMalloc(&c, size_t(m) * n * 2));
  FillHalf<<<1024, 256>>>(a, size_t(m) * k, 1); FillHalf<<<1024, 256>>>(b, size_t(n) * k, 2);
  cublasHandle_t h;
  LT_CHECK(cublasCreate(&h));
  float alpha = 1, beta = 0;
  auto call = [&] {
    LT_CHECK(cublasGemmEx(h, nt ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha, b, CUDA_R_16F,
                          nt ? k : n, a, CUDA_R_16F, k, &beta, c, CUDA_R_16F, n, CUBLAS_COMPUTE_32F,
                          CUBLAS_GEMM_DEFAULT));
  };
  for (int i = 0; i < 50; ++i) call();
  CHECK(cudaDeviceSynchronize());
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
  std::printf("plain_cublas %dx%dx%d %s warm_us %.2f (min %.2f)\n", m, n, k, layout.c_str(),
              per_call[per_call.size() / 2], per_call[0]);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
