// What cuBLASLt's heuristic returns for one problem, asked several times in one
// process, and how fast each algorithm it returns runs: to tell whether the
// runner's autotuning (best of the heuristic's top algorithms) can miss an
// algorithm because the heuristic's answer changes, or because its timing does.
// Describes the problem as the runner's LtGemm does (C^T = B^T A^T, column-major).
//   build/bin/bench/anvil-lt-heuristics --shape MxNxK [--layout nt|nn] [--queries 3] [--count 8]
#include <cublasLt.h>
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

// The configuration an algorithm stands for, as cuBLASLt names its parts.
void Describe(const cublasLtMatmulAlgo_t& a, char* out, size_t n) {
  int id = 0, tile = 0, stages = 0, splitk = 0, cluster = 0, swizzle = 0, red = 0;
  size_t w = 0;
  cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof(id), &w);
  cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof(tile), &w);
  cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof(stages), &w);
  cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof(splitk), &w);
  cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cluster, sizeof(cluster), &w);
  cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &swizzle, sizeof(swizzle), &w);
  cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &red, sizeof(red), &w);
  std::snprintf(out, n, "algo %3d tile %3d stages %3d splitk %2d cluster %3d swizzle %d red %d", id, tile,
                stages, splitk, cluster, swizzle, red);
}

int main(int argc, char** argv) {
  CLI::App app{"lt_heuristics: cuBLASLt's heuristic answers for one problem, asked several times, each timed"};
  ProbeShape shape;
  std::string layout = "nt";
  int queries = 3, count = 8;
  AddShapeOption(app, &shape);
  AddLayoutOption(app, &layout);
  app.add_option("--queries", queries, "times the heuristic is asked")->check(CLI::Range(1, 100));
  app.add_option("--count", count, "algorithms asked for")->check(CLI::Range(1, 64));
  CLI11_PARSE(app, argc, argv);
  const int m = shape.m, n = shape.n, k = shape.k;
  const bool nt = layout == "nt";
  const size_t ws_bytes = size_t(64) << 20;
  __half *a, *b, *c;
  void* ws;
  CHECK(cudaMalloc(&a, size_t(m) * k * 2));
  CHECK(cudaMalloc(&b, size_t(n) * k * 2));
  CHECK(cudaMalloc(&c, size_t(m) * n * 2));
  CHECK(cudaMalloc(&ws, ws_bytes));
  FillHalf<<<1024, 256>>>(a, size_t(m) * k, 1);
  FillHalf<<<1024, 256>>>(b, size_t(n) * k, 2);
  cublasLtHandle_t lt;
  LT_CHECK(cublasLtCreate(&lt));
  cublasLtMatmulDesc_t desc;
  LT_CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t op_b = nt ? CUBLAS_OP_T : CUBLAS_OP_N, op_n = CUBLAS_OP_N;
  LT_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_b, sizeof(op_b)));
  LT_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_n, sizeof(op_n)));
  cublasLtMatrixLayout_t la, lb, lc;
  LT_CHECK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16F, nt ? k : n, nt ? n : k, nt ? k : n));
  LT_CHECK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16F, k, m, k));
  LT_CHECK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16F, n, m, n));
  cublasLtMatmulPreference_t pref;
  LT_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  uint64_t wsb = ws_bytes;
  LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof(wsb)));
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  const float alpha = 1, beta = 0;
  for (int q = 0; q < queries; ++q) {
    std::vector<cublasLtMatmulHeuristicResult_t> res(count);
    int found = 0;
    LT_CHECK(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, lc, pref, count, res.data(), &found));
    std::printf("%dx%dx%d %s query %d: %d algorithms\n", m, n, k, layout.c_str(), q, found);
    for (int i = 0; i < found; ++i) {
      char d[160];
      Describe(res[i].algo, d, sizeof(d));
      // Median of 21 single calls, each timed alone with events after a sync.
      std::vector<float> us;
      for (int r = 0; r < 22; ++r) {
        CHECK(cudaDeviceSynchronize());
        CHECK(cudaEventRecord(e0));
        cublasStatus_t st = cublasLtMatmul(lt, desc, &alpha, b, la, a, lb, &beta, c, lc, c, lc,
                                           &res[i].algo, ws, ws_bytes, 0);
        CHECK(cudaEventRecord(e1));
        CHECK(cudaEventSynchronize(e1));
        if (st != CUBLAS_STATUS_SUCCESS) break;
        float ms = 0;
        CHECK(cudaEventElapsedTime(&ms, e0, e1));
        if (r > 0) us.push_back(ms * 1e3f);
      }
      std::sort(us.begin(), us.end());
      std::printf("  [%d] %s  waves %.2f  ws %zu  %8.2f us (events, one call)\n", i, d, res[i].wavesCount,
                  res[i].workspaceSize, us.empty() ? -1.0f : us[us.size() / 2]);
    }
  }
  return 0;
}
