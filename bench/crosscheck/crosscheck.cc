// anvil-crosscheck: times a built candidate and the cuBLAS family again, in
// the two graph regimes, by a method that shares no code with the runner, so
// a disagreement points at one of the two timers:
//   - every implementation of a shape is captured with the same number of
//     calls N (a replay of the slowest eager call lasting >= 2 ms), not N per
//     implementation;
//   - hot: all N calls on one operand set; cold: call j on set j mod S, each
//     set its own cudaMalloc (not slices of a pool), S sets over 3x the L2;
//   - time per call = events around R = 10 replays back to back (no L2 flush,
//     no input regeneration in between: the steady state of a streaming
//     loop) / (R N), median of 7, implementations interleaved by round;
//   - cuBLASLt autotuned here: the fastest of the heuristic's top 32
//     algorithms in that regime (each timed once, the best three again).
// Options that put back one condition of the runner at a time, to find which
// one moves a figure when the two timers disagree (Conditions in
// graph_timer.h): CUPTI attached as the runner attaches it, one timed replay
// after one untimed, and N sized per implementation.
// One plan row (plan.h) per process: `anvil-crosscheck --plan PLAN.csv --row I`. Prints
// CSV: m,n,k,layout,regime,candidate_us,cublas_us,lt_heuristic_us,lt_auto_us,
// ratio,runner_ratio,agree_3pct. The candidate's output is compared with
// cuBLAS's on random inputs first (a wrong kernel is reported, not timed).
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "bench/crosscheck/graph_timer.h"
#include "bench/crosscheck/plan.h"

namespace anvil::crosscheck {
namespace {

using GemmFn = int (*)(const __half*, const __half*, __half*, int, int, int, void*, cudaStream_t);
using WsFn = size_t (*)(int, int, int);

constexpr int kSamples = 7;

// The candidate ABI of a built library.
struct Candidate {
  GemmFn gemm;
  WsFn workspace;
};

// The row's library opened and its ABI found; nullopt (said on stderr) when not.
std::optional<Candidate> LoadCandidate(const Row& r) {
  void* lib = dlopen(r.library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) return std::fprintf(stderr, "cannot load %s: %s\n", r.library.c_str(), dlerror()), std::nullopt;
  auto gemm = reinterpret_cast<GemmFn>(dlsym(lib, "anvil_gemm"));
  auto wsfn = reinterpret_cast<WsFn>(dlsym(lib, "anvil_workspace_bytes"));
  if (!gemm || !wsfn) return std::fprintf(stderr, "%s lacks the candidate ABI\n", r.library.c_str()), std::nullopt;
  return Candidate{gemm, wsfn};
}

Call CandidateCall(const Row& r, GemmFn gemm, void* ws) {
  return [&r, gemm, ws](const __half* a, const __half* b, __half* c, cudaStream_t s) {
    if (gemm(a, b, c, r.m, r.n, r.k, ws, s) != 0) std::fprintf(stderr, "candidate returned an error\n"), std::exit(3);
  };
}

Call CublasCall(const Row& r, cublasHandle_t blas) {
  return [&r, blas](const __half* a, const __half* b, __half* c, cudaStream_t s) {
    const float one = 1, zero = 0;
    CC_CHECK(cublasSetStream(blas, s));
    CC_CHECK(cublasGemmEx(blas, r.nt ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, r.n, r.m, r.k, &one,
                          b, CUDA_R_16F, r.nt ? r.k : r.n, a, CUDA_R_16F, r.k, &zero, c, CUDA_R_16F,
                          r.n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  };
}

// CUPTI as the conditions ask, before the eager calls (the output check, sizing N).
void CuptiBeforeEagerCalls() {
  if (g_cond.audit || g_cond.finalize) g_cond.cupti = true;
  if (g_cond.cupti || g_cond.cupti_on || g_cond.cupti_toggle) {
    if (!g_cond.early) AttachCupti();  // --cupti-early attached it first thing
    CuptiActivity(true);
  } else if (g_cond.trace) {
    AttachCupti();
  }
  if (g_cond.audit) Callbacks(true);
}

// And after them, before the graphs are made.
void CuptiAfterEagerCalls() {
  if (g_cond.audit) Callbacks(false);
  if (!g_cond.cupti_on && (g_cond.cupti || g_cond.cupti_toggle)) CuptiActivity(false);
  if (g_cond.finalize) DetachCupti();
}

// With --reference, the runner's reference GEMM (fp32 output, the same cuBLAS
// handle, a second stream), run once now; a call that does nothing otherwise.
std::function<void()> Reference(const Row& r, cublasHandle_t blas, Timer& t) {
  if (!g_cond.reference) return [] {};
  cudaStream_t side = nullptr;
  float* c32 = nullptr;
  CC_CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
  CC_CHECK(cudaMalloc(&c32, size_t(r.m) * r.n * 4));
  std::function<void()> reference = [&r, blas, &t, side, c32] {
    const float one = 1, zero = 0;
    CC_CHECK(cublasSetStream(blas, side));
    CC_CHECK(cublasGemmEx(blas, r.nt ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, r.n, r.m, r.k, &one,
                          t.sets[0].b, CUDA_R_16F, r.nt ? r.k : r.n, t.sets[0].a, CUDA_R_16F, r.k,
                          &zero, c32, CUDA_R_32F, r.n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    CC_CHECK(cudaStreamSynchronize(side));
  };
  reference();
  return reference;
}

// With --regenerate, what runs before each sample of a regime: the hot set's
// A and B rewritten, or L2 flushed by a memset over flush (cold). seed goes on
// counting across regimes.
std::function<void()> Regenerate(Timer& t, bool cold, void* flush, size_t flush_bytes,
                                 unsigned& seed) {
  return [&t, cold, flush, flush_bytes, &seed] {
    const Row& r = t.row;
    if (cold) {
      CC_CHECK(cudaMemsetAsync(flush, int(seed++ & 0xff), flush_bytes, t.stream));
    } else {
      Fill(t.sets[0].a, size_t(r.m) * r.k, seed++);
      Fill(t.sets[0].b, size_t(r.n) * r.k, seed++);
    }
    CC_CHECK(cudaStreamSynchronize(t.stream));
  };
}

// cuBLASLt autotuned in this regime: each algorithm once, the best three of
// them (their indices) to time again.
std::vector<int> AutotuneLt(Timer& t, Lt& lt, bool cold) {
  std::vector<std::pair<double, int>> tried;
  for (int i = 0; i < int(lt.algos.size()); ++i) {
    cudaGraphExec_t g = t.Capture(lt.With(i), cold);
    tried.push_back({t.SampleOf(g), i});
    cudaGraphExecDestroy(g);
  }
  std::sort(tried.begin(), tried.end());
  tried.resize(std::min<size_t>(3, tried.size()));
  std::vector<int> best;
  for (const auto& [us, i] : tried) best.push_back(i);
  return best;
}

// kSamples rounds, implementations interleaved by round: us[i] are graphs[i]'s samples.
std::vector<std::vector<double>> Samples(Timer& t, const std::vector<cudaGraphExec_t>& graphs,
                                         const Call& cublas, const std::function<void()>& reference) {
  std::vector<std::vector<double>> us(graphs.size());
  for (int s = 0; s < kSamples; ++s) {
    reference();
    if (g_cond.cupti_toggle) {
      CuptiActivity(true);
      cublas(t.sets[0].a, t.sets[0].b, t.sets[0].c, t.stream);
      CC_CHECK(cudaStreamSynchronize(t.stream));
      CuptiActivity(false);
    }
    for (size_t j = 0; j < graphs.size(); ++j) {
      const size_t i = (j + s) % graphs.size();
      us[i].push_back(t.SampleOf(graphs[i]));
    }
  }
  return us;
}

// One regime: the candidate, cuBLAS, cuBLASLt's heuristic choice and its three
// autotuned best, timed; prints the row's CSV line.
void TimeRegime(const Row& r, Timer& t, Lt& lt, const Call& cand, const Call& cublas,
                const std::function<void()>& reference, bool cold) {
  std::vector<Call> impls = {cand, cublas, lt.With(0)};
  for (int i : AutotuneLt(t, lt, cold)) impls.push_back(lt.With(i));
  std::vector<cudaGraphExec_t> graphs;
  for (const Call& c : impls) graphs.push_back(t.Capture(c, cold));
  const std::vector<std::vector<double>> us = Samples(t, graphs, cublas, reference);
  if (g_cond.trace) {
    const char* names[] = {"candidate", "cublas", "cublaslt_heuristic"};
    for (size_t i = 0; i < graphs.size(); ++i) {
      const std::string name = i < 3 ? names[i] : "cublaslt_auto_" + std::to_string(i - 3);
      TraceReplay(t, graphs[i], cold ? "graph-cold" : "graph-hot", name.c_str());
    }
    if (g_cond.cupti_on) CuptiActivity(true);
  }
  for (cudaGraphExec_t g : graphs) cudaGraphExecDestroy(g);
  double lt_auto = 1e30;
  for (size_t i = 3; i < us.size(); ++i) lt_auto = std::min(lt_auto, Median(us[i]));
  const double ours = Median(us[0]), cb = Median(us[1]), lh = Median(us[2]);
  const double ratio = std::min({cb, lh, lt_auto}) / ours;
  const double runner = cold ? r.runner_cold : r.runner_hot;
  std::printf("%d,%d,%d,%s,%s,%.3f,%.3f,%.3f,%.3f,%.4f,%.4f,%s\n", r.m, r.n, r.k,
              r.nt ? "nt" : "nn", cold ? "graph-cold" : "graph-hot", ours, cb, lh, lt_auto, ratio,
              runner, Agrees(ratio, runner, 0.03) ? "yes" : "no");
}

int Run(const Row& r) {
  if (g_cond.early) AttachCupti(), g_cond.cupti = true;
  const std::optional<Candidate> lib = LoadCandidate(r);
  if (!lib) return 2;
  cudaDeviceProp prop;
  CC_CHECK(cudaGetDeviceProperties(&prop, 0));
  Timer t{r, nullptr, {}, 4, [] {}, {}};
  CC_CHECK(cudaStreamCreateWithFlags(&t.stream, cudaStreamNonBlocking));
  const double set_bytes = 2.0 * (double(r.m) * r.k + double(r.n) * r.k + double(r.m) * r.n);
  const int cold_sets = std::max(2, int(std::ceil(3.0 * prop.l2CacheSize / set_bytes)) + 1);
  for (int s = 0; s <= cold_sets; ++s) t.sets.push_back(Allocate(r, 1234u + s));
  void* ws = nullptr;
  const size_t ws_bytes = lib->workspace(r.m, r.n, r.k);
  if (ws_bytes) CC_CHECK(cudaMalloc(&ws, ws_bytes));
  CC_CHECK(cudaDeviceSynchronize());
  cublasHandle_t blas;
  CC_CHECK(cublasCreate(&blas));
  Lt lt(r);
  const Call cand = CandidateCall(r, lib->gemm, ws), cublas = CublasCall(r, blas);
  CuptiBeforeEagerCalls();
  const std::function<void()> reference = Reference(r, blas, t);
  const double err = CompareOutputs(r, cand, cublas, t);
  if (err > 2e-2) return std::fprintf(stderr, "candidate output differs from cuBLAS by %g\n", err), 3;
  double slowest = std::max(t.EagerUs(cand), t.EagerUs(cublas));
  t.calls = std::clamp(int(std::ceil(2000.0 / slowest)), 4, 4096);
  t.calls = (t.calls + cold_sets - 1) / cold_sets * cold_sets;
  CuptiAfterEagerCalls();
  void* flush = nullptr;
  const size_t flush_bytes = 2 * size_t(prop.l2CacheSize);
  if (g_cond.regenerate) CC_CHECK(cudaMalloc(&flush, flush_bytes));
  unsigned regen_seed = 99;
  for (bool cold : {false, true}) {
    if (g_cond.regenerate) t.before_sample = Regenerate(t, cold, flush, flush_bytes, regen_seed);
    TimeRegime(r, t, lt, cand, cublas, reference, cold);
  }
  return 0;
}

}  // namespace
}  // namespace anvil::crosscheck

int main(int argc, char** argv) {
  CLI::App app("Times a built candidate and the cuBLAS family in the graph regimes, "
               "independently of the runner; one plan row per process.");
  anvil::crosscheck::Conditions& cond = anvil::crosscheck::g_cond;
  std::string plan;
  int row = 0;
  app.add_option("--plan", plan, "CSV: m,n,k,layout,library,runner_graph_cold,runner_graph_hot")
      ->required();
  app.add_option("--row", row, "which data row of the plan (0-based)")->required();
  app.add_flag("--cupti", cond.cupti,
               "attach CUPTI as the runner does: kernel activity on around the eager calls, "
               "off while timing");
  app.add_flag("--cupti-early", cond.early,
               "as --cupti, but CUPTI attached before the first CUDA call (before the context exists)");
  app.add_flag("--cupti-on", cond.cupti_on, "attach CUPTI and leave kernel activity on while timing");
  app.add_flag("--audit", cond.audit,
               "attach CUPTI with API callbacks of both domains on around the eager calls (the "
               "runner's correctness audit)");
  app.add_flag("--finalize", cond.finalize, "attach CUPTI, then detach it (cuptiFinalize) before timing");
  app.add_flag("--cupti-toggle", cond.cupti_toggle,
               "attach CUPTI and switch kernel activity on and off around one eager call before "
               "each round of samples, with the graphs alive (the runner's device samples do)");
  app.add_option("--replays", cond.replays, "replays between the two events (runner: 1)")
      ->check(CLI::Range(1, 100));
  app.add_option("--lead", cond.lead, "untimed replays launched just before the first event (runner: 1)")
      ->check(CLI::Range(0, 10));
  app.add_flag("--normal", cond.normal, "inputs drawn from N(0, 1), as the runner's");
  app.add_flag("--reference", cond.reference,
               "an fp32-output GEMM through the same cuBLAS handle on a second stream first and "
               "before every round (the runner's reference)");
  app.add_flag("--regenerate", cond.regenerate,
               "before each sample rewrite the hot set's A and B, and flush L2 in the cold regime");
  app.add_flag("--trace", cond.trace,
               "after the samples, one more replay per implementation watched by CUPTI: kernel "
               "duration and gap between kernels (stderr: trace,regime,impl,kernels,kernel_us,gap_us,span_us)");
  app.add_flag("--per-impl-calls", cond.per_impl,
               "size N per implementation from its own eager call (runner), not one N for all");
  CLI11_PARSE(app, argc, argv);
  std::ifstream in(plan);
  if (!in) return std::fprintf(stderr, "cannot read %s\n", plan.c_str()), 2;
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<std::vector<anvil::crosscheck::Row>> rows = anvil::crosscheck::ParsePlan(text.str());
  if (!rows.ok()) return std::fprintf(stderr, "%s\n", std::string(rows.status().message()).c_str()), 2;
  if (row < 0 || row >= int(rows->size())) return std::fprintf(stderr, "no row %d\n", row), 2;
  return anvil::crosscheck::Run((*rows)[row]);
}
