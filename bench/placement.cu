// Does a GEMM's speed depend on where its operands lie in memory?
// The runner keeps one set of operand buffers per problem for its whole process,
// and some configurations, ours and cuBLASLt's, are bimodal from one process to
// the next (bench/NOTES.md, "Harness", 2026-11-22). This program allocates SETS separate
// sets of A, B and C in one process (a spacer allocation of a varying size
// between sets) and times, on each set, the 03 seed configuration compiled in
// (its knobs as -DANVIL_*, as bench/cta_trace.cu) and cuBLASLt's heuristic top
// algorithm, interleaved set by set and round by round, the inputs rewritten
// before every call as the runner's device figure has them. Each call is timed
// alone by events queued behind a spinning kernel (device time plus ~1 µs of
// events, for both alike). If placement decides the mode, the per-set medians
// split into groups while each set's own samples agree. --vary names the operands
// that change from set to set (default "abc"); the others are set 0's.
// CMake builds one binary per line of bench/configs/placement.txt (the seed's
// knobs as -D, as the builder passes them; bench/CMakeLists.txt):
//   build/bin/bench/anvil-placement-NAME --shape MxNxK [--sets 6] [--rounds 15] [--vary abc]
#include "../seeds/03_wgmma_tma/kernel.cu"

#include <cublasLt.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cuda_check.h"
#include "lt_util.h"
#include "probe_args.h"

__global__ void SpinFor(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

struct Set {
  __half *a, *b, *c;
  void* spacer;
};

// cuBLASLt for C = A B^T (NT) or A B (NN), row-major, as the runner's LtGemm
// describes it (C^T = B^T A^T, column-major).
struct Lt {
  cublasLtHandle_t h;
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t la, lb, lc;
  cublasLtMatmulAlgo_t algo;
  void* ws;
  size_t ws_bytes = size_t(64) << 20;

  Lt(int m, int n, int k) {
    LT_CHECK(cublasLtCreate(&h));
    LT_CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t op_b = kNT ? CUBLAS_OP_T : CUBLAS_OP_N, op_n = CUBLAS_OP_N;
    LT_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_b, sizeof(op_b)));
    LT_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_n, sizeof(op_n)));
    LT_CHECK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16F, kNT ? k : n, kNT ? n : k, kNT ? k : n));
    LT_CHECK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16F, k, m, k));
    LT_CHECK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16F, n, m, n));
    CHECK(cudaMalloc(&ws, ws_bytes));
    cublasLtMatmulPreference_t pref;
    LT_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t wsb = ws_bytes;
    LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                  &wsb, sizeof(wsb)));
    cublasLtMatmulHeuristicResult_t res{};
    int found = 0;
    LT_CHECK(cublasLtMatmulAlgoGetHeuristic(h, desc, la, lb, lc, lc, pref, 1, &res, &found));
    if (found < 1) {
      std::fprintf(stderr, "cuBLASLt heuristic: no algorithm\n");
      std::exit(1);
    }
    algo = res.algo;
  }
  void Run(const Set& s) {
    const float alpha = 1, beta = 0;
    LT_CHECK(cublasLtMatmul(h, desc, &alpha, s.b, la, s.a, lb, &beta, s.c, lc, s.c, lc, &algo, ws,
                            ws_bytes, 0));
  }
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// SETS operand sets of an MxNxK problem, each its own allocations with a
// spacer of 2-10 MiB after them; the operands not in vary are set 0's.
std::vector<Set> AllocateSets(int sets, int m, int n, int k, const std::string& vary) {
  const size_t na = size_t(m) * k, nb = size_t(n) * k, nc = size_t(m) * n;
  std::vector<Set> s(sets);
  for (int i = 0; i < sets; ++i) {
    CHECK(cudaMalloc(&s[i].a, na * 2));
    CHECK(cudaMalloc(&s[i].b, nb * 2));
    CHECK(cudaMalloc(&s[i].c, nc * 2));
    CHECK(cudaMalloc(&s[i].spacer, (size_t(1) + (i * 7) % 5) << 21));  // 2-10 MiB
  }
  for (int i = 1; i < sets; ++i) {  // the operands that stay put are set 0's
    if (vary.find('a') == std::string::npos) s[i].a = s[0].a;
    if (vary.find('b') == std::string::npos) s[i].b = s[0].b;
    if (vary.find('c') == std::string::npos) s[i].c = s[0].c;
  }
  return s;
}

// The table's rows: per set, where its operands lie, the median and range of
// ours[set] and lts[set] (µs) and their ratio; then the ratio's spread over sets.
void PrintSets(const std::vector<Set>& s, const std::vector<std::vector<double>>& ours_by_set,
               const std::vector<std::vector<double>>& lts_by_set) {
  std::vector<double> all_ratio;
  const auto mib = [&](const void* p) {
    return double(reinterpret_cast<intptr_t>(p) - reinterpret_cast<intptr_t>(s[0].a)) / (1 << 20);
  };
  for (size_t i = 0; i < s.size(); ++i) {
    const std::vector<double>& ours = ours_by_set[i];
    const std::vector<double>& lts = lts_by_set[i];
    const double mo = Median(ours), ml = Median(lts);
    all_ratio.push_back(ml / mo);
    std::printf("  %3d  %11.3f %11.3f %11.3f  %9.2f (%8.2f-%8.2f)  %9.2f (%8.2f-%8.2f)  %.3f\n", int(i),
                mib(s[i].a), mib(s[i].b), mib(s[i].c), mo,
                *std::min_element(ours.begin(), ours.end()),
                *std::max_element(ours.begin(), ours.end()), ml,
                *std::min_element(lts.begin(), lts.end()), *std::max_element(lts.begin(), lts.end()),
                ml / mo);
  }
  std::printf("  ratio over sets: min %.3f median %.3f max %.3f\n",
              *std::min_element(all_ratio.begin(), all_ratio.end()), Median(all_ratio),
              *std::max_element(all_ratio.begin(), all_ratio.end()));
}

int main(int argc, char** argv) {
  CLI::App app{"placement: a compiled-in 03_wgmma_tma configuration and cuBLASLt on several operand sets"};
  ProbeShape shape;
  int sets = 6, rounds = 15;
  std::string vary = "abc", name_flag = argv[0];
  AddShapeOption(app, &shape);
  app.add_option("--sets", sets, "operand sets in this process")->check(CLI::Range(1, 64));
  app.add_option("--rounds", rounds, "timed rounds over the sets")->check(CLI::Range(1, 10000));
  app.add_option("--vary", vary, "operands that change from set to set (others are set 0's)");
  app.add_option("--name", name_flag, "name printed in the table (default: this program's)");
  CLI11_PARSE(app, argc, argv);
  const char* name = name_flag.c_str();
  const int m = shape.m, n = shape.n, k = shape.k;
  const size_t na = size_t(m) * k, nb = size_t(n) * k;
  const std::vector<Set> s = AllocateSets(sets, m, n, k, vary);
  void* ws = nullptr;
  const size_t ws_bytes = anvil_workspace_bytes(m, n, k);
  if (ws_bytes > 0) CHECK(cudaMalloc(&ws, ws_bytes));
  Lt lt(m, n, k);
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  // µs of one isolated call of impl 0 (ours) or 1 (cuBLASLt) on set i.
  const auto timed = [&](int impl, int i, unsigned seed) {
    FillHalf<<<1056, 256>>>(s[i].a, na, seed);
    FillHalf<<<1056, 256>>>(s[i].b, nb, seed ^ 0x9e3779b9u);
    CHECK(cudaDeviceSynchronize());
    SpinFor<<<1, 32>>>(40000);
    CHECK(cudaEventRecord(e0));
    if (impl == 0) {
      const int rc = anvil_gemm(s[i].a, s[i].b, s[i].c, m, n, k, ws, 0);
      if (rc != 0) {
        std::fprintf(stderr, "anvil_gemm: %d\n", rc);
        std::exit(1);
      }
    } else {
      lt.Run(s[i]);
    }
    CHECK(cudaEventRecord(e1));
    CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, e0, e1));
    return ms * 1e3;
  };
  for (int i = 0; i < sets; ++i)  // warm-up: module load, tensor maps, cuBLASLt's first call
    for (int impl = 0; impl < 2; ++impl) timed(impl, i, 1u);
  // us[impl][set]: the samples; which of the two goes first alternates.
  std::vector<std::vector<double>> us[2] = {std::vector<std::vector<double>>(sets),
                                            std::vector<std::vector<double>>(sets)};
  for (int r = 0; r < rounds; ++r)
    for (int i = 0; i < sets; ++i)
      for (int slot = 0; slot < 2; ++slot) {
        const int impl = (r + i + slot) % 2;
        us[impl][i].push_back(timed(impl, i, 1000u * r + 10u * i + impl));
      }
  std::printf("%s %dx%dx%d %s: %d sets (varying %s) x %d rounds, events around one call\n", name,
              m, n, k, kNT ? "nt" : "nn", sets, vary.c_str(), rounds);
  std::printf("  set  offsets of A, B, C from set 0's A (MiB)   ours-med (min-max)            "
              "lt-med (min-max)             ratio\n");
  PrintSets(s, us[0], us[1]);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
