// The report's JSON model: scope (job or GPU), per-problem winners in every
// regime, search curves and the roofline. Failures and rewards: sections.cc.
#include <algorithm>
#include <chrono>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "proto/figures.h"
#include "proto/problem.h"
#include "report/report.h"
#include "report/sections.h"

namespace anvil::report {
namespace {

using nlohmann::json;

// The speedup of one PASSED row in a regime, with a spread interval from
// both sides' (p90 - p10) / median; nullopt when either side lacks the regime.
std::optional<json> RowSpeedup(const v1::Measurement& m, const std::string& regime) {
  const v1::TimingStats* s = FigureStats(m.timings(), regime);
  const v1::Baseline* b = BestBaseline(m, regime);
  if (s == nullptr || b == nullptr) return std::nullopt;
  const v1::TimingStats& bs = *FigureStats(b->timings(), regime);
  const double us = s->median_us(), base = bs.median_us();
  const double sc = s->spread() / 2, sb = bs.spread() / 2;
  return json{{"us", us},
              {"spread", s->spread()},
              {"baseline", b->name()},
              {"baseline_us", base},
              {"baseline_spread", bs.spread()},
              {"speedup", base / us},
              {"speedup_lo", base * std::max(0.0, 1 - sb) / (us * (1 + sc))},
              {"speedup_hi", base * (1 + sb) / (us * std::max(1e-9, 1 - sc))}};
}

// The row a regime's winner is: of the rows with a baseline in the regime,
// the best verified one by proto/figures.h's rule (Beats, in measured
// order), else the best one.
const StoredMeasurement* Winner(const std::vector<StoredMeasurement>& history,
                                const std::string& regime) {
  const StoredMeasurement* best[2] = {nullptr, nullptr};  // [verified]
  for (const StoredMeasurement& m : history) {
    if (BestBaseline(m.measurement, regime) == nullptr) continue;
    const StoredMeasurement*& b = best[m.measurement.verified() ? 1 : 0];
    if (Beats(RankingUs(m.measurement, regime), b ? RankingUs(b->measurement, regime) : 0)) b = &m;
  }
  return best[1] != nullptr ? best[1] : best[0];
}

json CandidateJson(const v1::Candidate& c) {
  json params = json::object();
  for (const auto& [k, v] : c.params()) params[k] = v;
  return {{"id", c.id()},         {"name", c.name()},     {"family", c.family()},
          {"proposer", c.proposer()}, {"params", params}};
}

// Best-so-far speedup steps over a problem's history, in measured order.
json Curve(const std::vector<StoredMeasurement>& history, const std::string& regime,
           int64_t t0_ms, CandidateCache& candidates) {
  json steps = json::array();
  std::set<std::string> seen;
  if (t0_ms == 0 && !history.empty()) t0_ms = history.front().measurement.measured_at_unix_ms();
  double best = 0, last_t = 0, gpu_s = 0;
  for (size_t i = 0; i < history.size(); ++i) {
    const v1::Measurement& m = history[i].measurement;
    seen.insert(m.candidate_id());
    gpu_s += m.seconds();
    last_t = m.measured_at_unix_ms() > 0 ? (m.measured_at_unix_ms() - t0_ms) / 1000.0 : double(i);
    std::optional<json> s;
    if (m.verdict() == v1::VERDICT_PASSED) s = RowSpeedup(m, regime);
    if (!s.has_value() || (*s)["speedup"].get<double>() <= best) continue;
    best = (*s)["speedup"].get<double>();
    const v1::Candidate& c = candidates.Get(m.candidate_id());
    steps.push_back({{"tried", seen.size()}, {"t_s", last_t}, {"gpu_s", gpu_s}, {"speedup", best},
                     {"proposer", c.proposer().empty() ? "unknown" : c.proposer()},
                     {"family", c.family()}, {"name", c.name()}, {"verified", m.verified()}});
  }
  return {{"steps", steps}, {"tried", seen.size()}, {"t_s", last_t}, {"gpu_s", gpu_s}};
}

// Wall span and summed evaluation seconds of a history.
std::pair<double, double> Times(const std::vector<StoredMeasurement>& history) {
  int64_t first = 0, last = 0;
  double eval = 0;
  for (const StoredMeasurement& s : history) {
    const int64_t t = s.measurement.measured_at_unix_ms();
    if (t > 0 && (first == 0 || t < first)) first = t;
    last = std::max(last, t);
    eval += s.measurement.seconds();
  }
  return {first > 0 ? (last - first) / 1000.0 : 0, eval};
}

json ProblemJson(const v1::Problem& p, const std::vector<StoredMeasurement>& history,
                 const std::vector<std::string>& regimes, const std::string& figure,
                 int64_t t0_ms, CandidateCache& candidates) {
  json out = {{"name", absl::StrCat(ShapeName(p.shape()), " ", LayoutName(p.layout()))},
              {"gpu", p.gpu()}, {"m", p.shape().m()}, {"n", p.shape().n()}, {"k", p.shape().k()},
              {"layout", LayoutName(p.layout())}, {"flops", ProblemFlops(p)},
              {"bytes", ProblemBytes(p)}, {"measurements", history.size()}};
  auto [wall, eval] = Times(history);
  out["wall_s"] = wall;
  out["eval_s"] = eval;
  json regime_json = json::object();
  for (const std::string& r : regimes) {
    const StoredMeasurement* w = Winner(history, r);
    if (w == nullptr) continue;
    json j = *RowSpeedup(w->measurement, r);
    j["candidate"] = candidates.Get(w->measurement.candidate_id()).name();
    j["verified"] = w->measurement.verified();
    regime_json[r] = j;
  }
  out["regimes"] = regime_json;
  if (const StoredMeasurement* w = Winner(history, figure)) {
    const v1::Measurement& m = w->measurement;
    out["winner"] = CandidateJson(candidates.Get(m.candidate_id()));
    out["winner"]["verified"] = m.verified();
    out["winner"]["sol_us"] = m.sol_us();
    out["efficiency"] = m.sol_us() > 0 ? m.sol_us() / FigureUs(m.timings(), figure) : 0.0;
  }
  out["curve"] = Curve(history, figure, t0_ms, candidates);
  return out;
}

// The regimes any PASSED row of the scope has values for, in kFigures order.
std::vector<std::string> RegimesWithValues(const std::vector<ScopedProblem>& problems) {
  std::vector<std::string> out;
  for (absl::string_view r : kFigures) {
    bool any = false;
    for (const ScopedProblem& p : problems) {
      for (const StoredMeasurement& m : p.history) any = any || RankingUs(m.measurement, r) > 0;
    }
    if (any) out.emplace_back(r);
  }
  return out;
}

}  // namespace

absl::StatusOr<json> BuildReportModel(Store& store, const ReportOptions& options) {
  if (!options.figure.empty() && !IsFigure(options.figure)) {
    return absl::InvalidArgumentError(absl::StrCat("unknown figure '", options.figure, "'"));
  }
  absl::StatusOr<Scope> scope = LoadScope(store, options);
  if (!scope.ok()) return scope.status();
  std::vector<std::string> regimes = RegimesWithValues(scope->problems);
  std::string figure = options.figure.empty() ? scope->job_figure : options.figure;
  if (figure.empty() || std::find(regimes.begin(), regimes.end(), figure) == regimes.end()) {
    if (options.figure.empty() && !regimes.empty()) figure = regimes.front();
  }
  if (figure.empty()) figure = std::string(kDefaultFigure);
  CandidateCache candidates(store);
  json problems = json::array();
  for (const ScopedProblem& p : scope->problems) {
    problems.push_back(ProblemJson(p.problem, p.history, regimes, figure, scope->t0_ms, candidates));
  }
  const int64_t now = options.now_unix_ms > 0
                          ? options.now_unix_ms
                          : std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::system_clock::now().time_since_epoch()).count();
  json model = {{"format", 1},           {"generated_unix_ms", now},
                {"scope", scope->json},  {"figure", figure},
                {"regimes", regimes},    {"problems", problems},
                {"ceilings", Ceilings(scope->problems)}};
  absl::StatusOr<json> failures = Failures(store, *scope);
  if (!failures.ok()) return failures.status();
  model["failures"] = *failures;
  absl::StatusOr<json> rewards = Rewards(store, *scope, candidates);
  if (!rewards.ok()) return rewards.status();
  model["rewards"] = *rewards;
  return model;
}

}  // namespace anvil::report
