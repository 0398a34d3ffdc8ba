// anvil eval FILE.cu --shape MxNxK --layout nt|nn: build one candidate and
// measure it against the cuBLAS family on this node's GPU.
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>


#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "cli/cli.h"
#include "node/node_facts.h"
#include "proto/candidate.h"
#include "proto/figures.h"
#include "proto/problem.h"
#include "server/measure_callbacks.h"
#include "store/store.h"
#include "store/writer_lock.h"
#include "worker/local_evaluator.h"

namespace anvil::cli {
namespace {

void PrintBuild(const v1::Candidate& c, const v1::Build& b) {
  std::cout << "candidate  " << c.name() << "\n";
  std::cout << "build      " << v1::Verdict_Name(b.verdict()) << (b.cache_hit() ? " (cached)" : "");
  if (b.verdict() == v1::VERDICT_REJECTED) {
    std::cout << " before compiling\n";
  } else {
    std::cout << absl::StrFormat(" in %.1f s, nvcc %s, %s\n", b.seconds(), b.nvcc_version(), b.arch());
  }
  for (const v1::KernelUsage& k : b.usage()) {
    std::cout << absl::StrFormat("  kernel   %d registers, %d B smem, %d B stack, %d/%d B spill  %.60s\n",
                                 k.registers(), k.shared_bytes(), k.stack_frame_bytes(),
                                 k.spill_store_bytes(), k.spill_load_bytes(), k.kernel());
  }
  if (b.verdict() != v1::VERDICT_PASSED) {
    std::cout << "verdict    " << v1::Verdict_Name(b.verdict()) << "\n";
  }
  if (!b.error().empty()) std::cout << b.error();
}

void PrintRow(const std::string& name, const v1::Timings& t, double rel_err) {
  std::cout << absl::StrFormat("  %-20s %10.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f   %.2e\n", name,
                               t.graph_cold().median_us(), t.graph_hot().median_us(),
                               t.device().median_us(), t.cold().median_us(), t.warm().median_us(),
                               t.call().median_us(), t.first_call_us(), rel_err);
}

// The counter profile (--profile): each metric for the candidate and the
// fastest baseline side by side.
void PrintCounters(const v1::Measurement& m) {
  const auto& p = m.profile();
  auto index = p.find("hw.baseline_index");
  const std::string baseline =
      index != p.end() && index->second >= 0 && index->second < m.baselines_size()
          ? m.baselines(static_cast<int>(index->second)).name()
          : "baseline";
  bool header = false;
  for (const auto& [key, value] : std::map<std::string, double>(p.begin(), p.end())) {
    if (!absl::StartsWith(key, "hw.") || absl::StartsWith(key, "hw.baseline")) continue;
    if (!header) {
      std::cout << absl::StrFormat("  %-72s %14s %14s\n", "counters (one call)", "candidate",
                                   baseline);
      header = true;
    }
    const std::string name = key.substr(3);
    auto b = p.find("hw.baseline." + name);
    std::cout << absl::StrFormat("  %-72s %14.4g %14s\n", name, value,
                                 b == p.end() ? "-" : absl::StrFormat("%.4g", b->second));
  }
  if (!m.profile_error().empty()) std::cout << "counters   " << m.profile_error() << "\n";
}

// The watched graph replays (--graph-trace; the candidate's always): per
// implementation and regime, the figure beside the wall time per kernel of the
// watched replay, how it splits into kernel and gap, and the graph's
// programmatic (PDL) edges per call.
void PrintGraphTrace(const v1::Measurement& m) {
  const auto& p = m.profile();
  auto get = [&p](const std::string& key) {
    auto it = p.find(key);
    return it == p.end() ? std::optional<double>() : std::optional<double>(it->second);
  };
  std::vector<std::pair<std::string, const v1::Timings*>> impls = {{"candidate", &m.timings()}};
  for (const v1::Baseline& b : m.baselines()) impls.push_back({b.name(), &b.timings()});
  bool header = false;
  for (const bool cold : {false, true}) {
    const std::string regime = cold ? "graph_cold" : "graph_hot";
    for (const auto& [name, timings] : impls) {
      std::optional<double> span = get(absl::StrCat(regime, "_trace_span_us.", name));
      if (!span) continue;
      if (!header) {
        std::cout << absl::StrFormat("  %-20s %-6s %9s %9s %9s %9s %5s\n", "graph trace (us/kernel)",
                                     "regime", "figure", "span", "kernel", "gap", "pdl");
        header = true;
      }
      std::cout << absl::StrFormat(
          "  %-20s %-6s %9.3f %9.3f %9.3f %9.3f %5.2f\n", name, cold ? "cold" : "hot",
          (cold ? timings->graph_cold() : timings->graph_hot()).median_us(), *span,
          get(absl::StrCat(regime, "_trace_kernel_us.", name)).value_or(0),
          get(absl::StrCat(regime, "_trace_gap_us.", name)).value_or(0),
          get(absl::StrCat(regime, "_programmatic_edges_per_call.", name)).value_or(0));
    }
  }
}

void PrintMeasurement(const v1::Measurement& m) {
  std::cout << "problem    " << ShapeName(m.problem().shape()) << " " << LayoutName(m.problem().layout())
            << " on " << m.problem().gpu() << "\n";
  std::cout << "verdict    " << v1::Verdict_Name(m.verdict());
  if (!m.reason().empty()) std::cout << " " << m.reason() << ": " << m.detail();
  std::cout << "\n";
  if (m.time_limit_s() > 0) {
    std::cout << absl::StrFormat("limits     %.3g s for this problem (%s), output cap %d KiB\n",
                                 m.time_limit_s(), m.time_limit_basis(), m.output_cap_bytes() / 1024);
  }
  if (m.verdict() != v1::VERDICT_PASSED) return;
  std::cout << absl::StrFormat("  %-20s %10s %9s %9s %9s %9s %9s %9s   %s\n", "us (median)",
                               "graph-cold", "graph-hot", "device", "cold", "warm", "call", "first",
                               "rel_err");
  PrintRow("candidate", m.timings(), m.rel_err());
  for (const v1::Baseline& b : m.baselines()) PrintRow(b.name(), b.timings(), b.rel_err());
  std::cout << "speedup vs best baseline:";
  for (absl::string_view figure : kFigures) {
    std::cout << absl::StrFormat("  %s %.3fx", figure, SpeedupOverBestBaseline(m, figure));
  }
  std::cout << "\n";
  if (!m.graph_note().empty()) std::cout << "graph figures: " << m.graph_note() << "\n";
  std::cout << absl::StrFormat("graph replays: hot %d calls, cold %d calls over %d operand sets\n",
                               m.timings().graph_calls_hot(), m.timings().graph_calls_cold(),
                               m.timings().graph_cold_sets());
  std::cout << absl::StrFormat("efficiency %.1f%% of speed-of-light (%.2f us); spread %.1f%%; "
                               "graph capturable: %s; kernels per call: %d\n",
                               100 * m.efficiency(), m.sol_us(), 100 * m.timings().device().spread(),
                               m.graph_capturable() ? "yes" : "no", m.kernels_per_call());
  PrintCounters(m);
  PrintGraphTrace(m);
}

absl::StatusOr<v1::Candidate> LoadCandidate(const EvalArgs& a) {
  absl::StatusOr<v1::Layout> layout = ParseLayout(a.layout);
  if (!layout.ok()) return layout.status();
  std::ifstream in(a.file);
  if (!in) return absl::NotFoundError("cannot read " + a.file);
  std::stringstream ss;
  ss << in.rdbuf();
  v1::Candidate c;
  c.set_source(ss.str());
  c.set_layout(*layout);
  if (a.arch != "sm_90a" && a.arch != "sm_90") return absl::InvalidArgumentError("--arch must be sm_90a or sm_90");
  c.set_arch(a.arch);
  c.set_proposer("user");
  c.set_family("user");
  for (const std::string& p : a.params) {
    std::vector<std::string> kv = absl::StrSplit(p, absl::MaxSplits('=', 1));
    if (kv.size() != 2 || kv[0].empty()) return absl::InvalidArgumentError("--param wants KEY=VALUE, got '" + p + "'");
    (*c.mutable_params())[kv[0]] = kv[1];
  }
  AssignCandidateId(c);
  c.set_name(CandidateDisplayName(c));
  return c;
}

// Measures a candidate on the shapes (nothing for a failed build).
absl::StatusOr<MeasureResult> MeasureOnce(CandidateEvaluator& evaluator, const v1::Candidate& c,
                                          const v1::Build& build, const std::vector<v1::Shape>& shapes) {
  if (build.verdict() != v1::VERDICT_PASSED) return MeasureResult();
  MeasureRequest r;
  r.candidate = c;
  r.build = build;
  r.shapes = shapes;
  std::vector<absl::StatusOr<MeasureResult>> out = evaluator.Measure({r}, {});
  if (out.empty()) return absl::InternalError("the evaluator answered nothing");
  return out[0];
}

// `anvil eval --store`: the candidate, its build, its measurements (in no
// job) and the cuBLASLt choices its runner tuned, persisted as a job's round
// is: through the store's measure callback (server/measure_callbacks.h).
absl::Status StoreEvaluation(Store& store, const v1::Candidate& c, const v1::Build& build,
                             MeasureResult out) {
  std::vector<ProblemView> problems;
  Observation o;
  o.proposal.candidate = c;
  o.build = build;
  o.outcome = build.verdict() == v1::VERDICT_PASSED ? Outcome::kMeasured : Outcome::kBuildFailed;
  for (const v1::Measurement& m : out.measurements) {
    ProblemView& v = problems.emplace_back();
    v.spec = {m.problem().shape(), m.problem().layout()};
    v.problem = m.problem();
    v.name = ProblemName(m.problem());
    o.proposal.problems.push_back(static_cast<int>(problems.size()) - 1);
    o.measured_on.push_back(static_cast<int>(problems.size()) - 1);
  }
  o.measurements = std::move(out.measurements);
  std::vector<Observation> observations;
  observations.push_back(std::move(o));
  MeasuredRound round;
  round.figure = std::string(kDefaultFigure);
  round.problems = &problems;
  round.observations = &observations;
  round.tuned = std::move(out.tuned);
  return MakeStoreCallback(store)->Apply(round);
}

// Prints the outcome (one JSON line per problem with --json, or one for the
// build when it failed) and returns kCandidateFailed unless everything PASSED.
int PrintOutcome(const Globals& g, const v1::Candidate& c, const v1::Build& build,
                 const std::vector<v1::Measurement>& measurements) {
  bool failed = build.verdict() != v1::VERDICT_PASSED;
  v1::Kernel k;
  *k.mutable_candidate() = c;
  k.mutable_candidate()->clear_source();
  *k.mutable_build() = build;
  for (const v1::Measurement& m : measurements) {
    failed |= m.verdict() != v1::VERDICT_PASSED;
    if (!g.json) {
      PrintMeasurement(m);
      continue;
    }
    *k.mutable_measurement() = m;  // one JSON line per problem
    std::cout << ToJson(k) << "\n";
  }
  if (g.json && measurements.empty()) std::cout << ToJson(k) << "\n";
  if (failed && !g.json) std::cout << "the candidate failed (exit " << kCandidateFailed << ")\n";
  return failed ? kCandidateFailed : kOk;
}

}  // namespace

int RunEval(const Globals& g, const EvalArgs& a) {
  std::vector<v1::Shape> shapes;
  for (const std::string& text : a.shapes) {
    absl::StatusOr<v1::Shape> shape = ParseShape(text);
    if (!shape.ok()) return Report(shape.status(), kUsage);
    shapes.push_back(*shape);
  }
  absl::StatusOr<v1::Candidate> c = LoadCandidate(a);
  if (!c.ok()) return Report(c.status(), kUsage);
  std::unique_ptr<Store> store;
  std::optional<WriterLock> writer;  // held while the store is written
  if (a.store) {
    absl::StatusOr<WriterLock> lock = WriterLock::Acquire(g.db, "anvil eval");
    if (!lock.ok()) return Report(lock.status(), kDatabase);
    writer.emplace(*std::move(lock));
    absl::StatusOr<std::unique_ptr<Store>> s = Store::Open(g.db);
    if (!s.ok()) return Report(s.status(), kDatabase);
    store = std::move(*s);
  }
  LocalEvaluatorOptions options;
  options.allow_no_isolation = g.allow_no_isolation;
  options.protocol.set_rounds(a.rounds);
  options.protocol.set_operand_sets(a.operand_sets);
  options.protocol.set_profile_counters(a.profile);
  options.protocol.set_graph_trace(a.graph_trace);
  absl::StatusOr<std::unique_ptr<LocalEvaluator>> evaluator = LocalEvaluator::Create(options);
  if (!evaluator.ok()) return Report(evaluator.status(), kUnavailable);
  std::vector<absl::StatusOr<v1::Build>> builds = (*evaluator)->Build({*c}, {});
  if (!builds[0].ok()) return Report(builds[0].status(), kFailed);
  if (!g.json) PrintBuild(*c, *builds[0]);
  std::string why;
  if (builds[0]->verdict() == v1::VERDICT_PASSED && node::CountGpus(&why) == 0) {
    std::cerr << "anvil: built, but cannot measure: " << why << ". " << NoGpuAdvice() << "\n";
    return kUnavailable;
  }
  absl::StatusOr<MeasureResult> out = MeasureOnce(**evaluator, *c, *builds[0], shapes);
  if (!out.ok()) return Report(out.status(), kFailed);
  if (store) {
    if (absl::Status st = StoreEvaluation(*store, *c, *builds[0], *out); !st.ok()) return Report(st, kDatabase);
  }
  return PrintOutcome(g, *c, *builds[0], out->measurements);
}

}  // namespace anvil::cli
