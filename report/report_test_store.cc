#include "report/report_test_store.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "proto/figures.h"
#include "proto/problem.h"
#include "report/report.h"
#include "report/sections.h"

namespace anvil::report::testing {
namespace {

constexpr double kPeak = 7.6e14, kBandwidth = 3.0e12;  // H100 SXM, as the runner measures

struct TestProblem {
  int64_t m, n, k;
  double baseline_us;  // cuBLAS, device time
  double final_gain;   // the search's best speedup at the end
};
const TestProblem kProblems[] = {
    {4096, 4096, 4096, 190.0, 1.06}, {16, 4096, 4096, 14.0, 1.32}, {1000, 1000, 1000, 9.5, 0.96}};

v1::Problem ProblemOf(const TestProblem& t) {
  return MakeProblem(kTestGpu, "sm_90a", MakeShape(t.m, t.n, t.k), v1::LAYOUT_NT);
}

// Every regime of Timings, scaled from the device time (cold slower, graph-hot
// fastest); `host` scales the regimes with host overhead (warm, call).
void FillTimings(double device_us, double spread, v1::Timings* t, double host = 1.0) {
  for (absl::string_view r : kFigures) {
    v1::TimingStats* s = MutableFigureStats(t, r);
    const double scale = r == "cold" ? 1.25 : r == "graph-cold" ? 1.18 : r == "warm" ? 1.03
                         : r == "call" ? 1.15 : r == "graph-hot" ? 0.98 : 1.0;
    const double us = device_us * scale * (r == "warm" || r == "call" ? host : 1.0);
    s->set_median_us(us);
    s->set_min_us(us * (1 - spread / 2));
    s->set_p90_us(us * (1 + spread / 2));
    s->set_spread(spread);
    s->set_samples(20);
  }
}

v1::Candidate MakeCandidate(int i, const std::string& proposer) {
  static const char* kTiles[] = {"128x128x64", "128x256x64", "64x256x64", "256x128x64"};
  const std::string tile = kTiles[i % 4];
  v1::Candidate c;
  c.set_id(absl::StrCat("c", 1000000 + i, "abcdef0123456789"));
  c.set_name(absl::StrCat("sm90_wgmma_", tile, "_s", 3 + i % 3, "_nt_", c.id().substr(0, 8)));
  c.set_source(absl::StrCat("// test kernel ", i, "\n"));
  c.set_proposer(proposer);
  c.set_family(proposer == "llm" ? "llm_free_form" : "sm90_wgmma_tma");
  (*c.mutable_params())["TILE"] = tile;
  (*c.mutable_params())["STAGES"] = absl::StrCat(3 + i % 3);
  (*c.mutable_params())["RASTER"] = i % 2 ? "along_n" : "along_m";
  c.set_layout(v1::LAYOUT_NT);
  c.set_arch("sm_90a");
  return c;
}

v1::Measurement MakeMeasurement(const v1::Candidate& c, const TestProblem& t, double us,
                                int64_t at) {
  v1::Measurement m;
  m.set_candidate_id(c.id());
  *m.mutable_problem() = ProblemOf(t);
  m.set_verdict(v1::VERDICT_PASSED);
  FillTimings(us, 0.03, m.mutable_timings());
  const char* names[] = {"cublas", "cublaslt_heuristic", "cublaslt_auto"};
  const double factors[] = {1.0, 1.02, 0.99};
  for (int b = 0; b < 3; ++b) {
    v1::Baseline* base = m.add_baselines();
    base->set_name(names[b]);
    FillTimings(t.baseline_us * factors[b], 0.02, base->mutable_timings(), 0.97);
  }
  const v1::Problem p = ProblemOf(t);
  m.set_sol_us(std::max(ProblemFlops(p) / kPeak, ProblemBytes(p) / kBandwidth) * 1e6);
  m.set_efficiency(m.sol_us() / us);
  m.set_measured_at_unix_ms(at);
  m.set_seconds(3.5);
  m.set_worker("worker-test-1");
  return m;
}

absl::Status PutFailedBuilds(Store& store, std::atomic<int64_t>& clock) {
  const char* errors[] = {
      "kernel.cu(41): error: identifier \"warpgroup_arrive\" is undefined\n",
      "kernel.cu(88): error: too many resources requested for launch\n",
      "kernel.cu(12): error: identifier \"smem_b\" is undefined\n",
      "nvcc: killed after the compile time limit (120 s)\n"};
  for (int i = 0; i < 4; ++i) {
    v1::Candidate c = MakeCandidate(900 + i, "llm");
    if (absl::Status st = store.PutCandidate(c); !st.ok()) return st;
    v1::Build b;
    b.set_candidate_id(c.id());
    b.set_verdict(v1::VERDICT_COMPILE_ERROR);
    b.set_error(errors[i]);
    b.set_seconds(i == 3 ? 120 : 25);
    clock += 2000;
    if (absl::StatusOr<int64_t> id = store.PutBuild(b); !id.ok()) return id.status();
  }
  return absl::OkStatus();
}

// Failure kinds at fixed steps of the search: verdict and reason.
std::pair<v1::Verdict, std::string> FailureAt(int step) {
  if (step == 13) return {v1::VERDICT_CHEAT, "async_work_after_return"};
  if (step == 17) return {v1::VERDICT_CRASHED, "illegal_address"};
  if (step % 11 == 10) return {v1::VERDICT_TIMEOUT, "wall_limit"};
  if (step % 7 == 6) return {v1::VERDICT_INCORRECT, "wrong_result"};
  return {v1::VERDICT_PASSED, ""};
}

absl::Status PutReward(Store& store, const v1::Measurement& m, int64_t id, const std::string& proposer,
                       int step) {
  Reward r;
  r.measurement_id = id;
  r.candidate_id = m.candidate_id();
  r.problem = m.problem();
  r.job_id = kTestJob;
  r.figure = "device";
  r.created_unix_ms = m.measured_at_unix_ms();
  if (m.verdict() == v1::VERDICT_PASSED) {
    r.kind = "speedup";
    r.value = std::log2(BestBaselineUs(m, "device") / m.timings().device().median_us());
  } else {
    r.kind = absl::AsciiStrToLower(v1::Verdict_Name(m.verdict()).substr(8));
    r.value = -1;
  }
  const char* recipes[] = {"best+contrastive", "best-only", "repair"};
  r.details_json = proposer == "llm" ? absl::StrCat("{\"recipe\":\"", recipes[step % 3], "\"}") : "{}";
  return store.PutReward(r).status();
}

}  // namespace

absl::Status WriteTestSearch(Store& store, std::atomic<int64_t>& clock) {
  clock = kTestStart;
  v1::OptimizeKernelRequest request;
  request.set_proposer("embedded");
  request.mutable_budget()->set_max_wall_seconds(1800);
  for (const TestProblem& t : kProblems) *request.add_problems() = ProblemOf(t);
  if (absl::Status st = store.CreateJob(kTestJob, request); !st.ok()) return st;
  if (absl::Status st = store.UpdateJobState(kTestJob, v1::JOB_STATE_RUNNING); !st.ok()) return st;
  if (absl::Status st = PutFailedBuilds(store, clock); !st.ok()) return st;
  constexpr int kSteps = 24;
  for (int step = 0; step < kSteps; ++step) {
    const std::string proposer = step < 3 ? "seed" : step % 5 == 4 ? "llm" : "embedded";
    v1::Candidate c = MakeCandidate(step, proposer);
    if (absl::Status st = store.PutCandidate(c); !st.ok()) return st;
    for (const TestProblem& t : kProblems) {
      // Speedup climbs from 0.6x of the final gain, with noise, towards it.
      const double progress = std::pow(double(step + 1) / kSteps, 0.5);
      const double noise = 1 + 0.08 * std::sin(step * 2.3 + t.m);
      const double gain = t.final_gain * (0.6 + 0.4 * progress) / std::max(1.0, noise);
      clock += 4000;
      v1::Measurement m = MakeMeasurement(c, t, t.baseline_us / gain, clock);
      auto [verdict, reason] = FailureAt(step + int(t.k % 3));
      m.set_verdict(verdict);
      m.set_reason(reason);
      if (!reason.empty()) m.set_detail(absl::StrCat(reason, " on the check after timing"));
      absl::StatusOr<int64_t> id = store.PutMeasurement(m, std::string(kTestJob));
      if (!id.ok()) return id.status();
      if (absl::Status st = PutReward(store, m, *id, proposer, step); !st.ok()) return st;
    }
  }
  for (const TestProblem& t : kProblems) {  // the verify stage: the final gain, re-measured
    v1::Candidate c = MakeCandidate(kSteps - 1, "embedded");
    clock += 5000;
    v1::Measurement m = MakeMeasurement(c, t, t.baseline_us / t.final_gain, clock);
    m.set_verified(true);
    if (absl::StatusOr<int64_t> id = store.PutMeasurement(m, std::string(kTestJob)); !id.ok()) {
      return id.status();
    }
  }
  WorkerRecord w;
  w.id = "worker-test-1";
  w.hostname = "gpu-node-1";
  v1::GpuInfo g;
  g.set_ordinal(0);
  g.set_model(kTestGpu);
  g.set_uuid("GPU-00000000-test");
  g.set_memory_bytes(int64_t(80) << 30);
  w.gpus.push_back(g);
  w.build_jobs = 2;  // build slots beside the GPU
  w.versions = "cuda=13.0 cublas=13.1.0 driver=580.95";
  return store.UpsertWorker(w);
}

absl::StatusOr<std::unique_ptr<Store>> OpenTestStore(const std::string& path,
                                                     std::atomic<int64_t>& clock) {
  StoreOptions options;
  options.now_unix_ms = [&clock] { return clock.load(); };
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(path, options);
  if (!store.ok()) return store.status();
  if (absl::Status st = WriteTestSearch(**store, clock); !st.ok()) return st;
  return store;
}

absl::Status ProgressTestJob(Store& store, std::atomic<int64_t>& clock, int step) {
  const TestProblem& t = kProblems[step % 3];
  v1::Candidate c = MakeCandidate(100 + step, "embedded");
  if (absl::Status st = store.PutCandidate(c); !st.ok()) return st;
  clock += 1000;
  const double gain = t.final_gain * (1.0 + 0.02 * (step + 1));
  v1::Measurement m = MakeMeasurement(c, t, t.baseline_us / gain, clock);
  absl::StatusOr<int64_t> id = store.PutMeasurement(m, std::string(kTestJob));
  if (!id.ok()) return id.status();
  return store.RecordHeartbeat("worker-test-1");
}

}  // namespace anvil::report::testing
