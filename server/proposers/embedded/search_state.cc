#include "server/proposers/embedded/search_state.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "proto/figures.h"
#include "seeds/space.h"

namespace anvil {
namespace {

// A best that improves by less than this factor is no gain (evolve's patience).
constexpr double kGain = 0.995;

}  // namespace

SearchState::SearchState(const std::vector<SeedFamily>& seeds, const std::vector<ShapeSpec>& problems,
                         std::string job_id, SearchOptions options, ProgressFn progress,
                         double elapsed_at_start)
    : seeds_(seeds), job_id_(std::move(job_id)), options_(std::move(options)), progress_(std::move(progress)),
      model_(options_.device), start_(Now()), elapsed_at_start_(elapsed_at_start),
      stage_deadline_(options_.seeds_only ? options_.budget_seconds
                                          : options_.budget_seconds *
                                                (1 - std::clamp(options_.evolve_share, 0.0, 1.0))) {
  for (const ShapeSpec& s : problems) {
    ProblemState p;
    p.spec = s;
    p.name = absl::StrCat(ShapeName(s.shape), " ", LayoutName(s.layout));
    problems_.push_back(std::move(p));
  }
}

void SearchState::See(const SearchView& view) {
  if (view.device) device_ = view.device;
  final_phase_ = view.final_phase;
  history_ = view.history;
}

SearchState::Clock::time_point SearchState::Now() const {
  return options_.clock ? options_.clock() : Clock::now();
}

double SearchState::Seconds() const { return std::chrono::duration<double>(Now() - start_).count(); }

bool SearchState::OverBudget() {
  const double s = Seconds();
  if (s >= options_.budget_seconds || final_phase_) {
    if (!result_.budget_exhausted) {
      progress_(absl::StrFormat("budget of %.0f s spent: stopping the search (rerun to resume)",
                                options_.budget_seconds));
    }
    result_.budget_exhausted = true;
    return true;
  }
  if (s < stage_deadline_) return false;
  if (!stages_cut_) {
    progress_(absl::StrFormat("[%s] %.0f s of the %.0f s budget spent: the rest is the evolve "
                              "stage's (a rerun resumes this stage)",
                              stage_, s, options_.budget_seconds));
  }
  stages_cut_ = true;
  return true;
}

Config* SearchState::Intern(const SeedFamily& f, v1::Layout layout, const KnobParams& params) {
  KnobParams full = WithDefaults(f, params);
  auto [known, added] = interned_.try_emplace({&f, layout, full}, nullptr);
  if (!added) return known->second;
  v1::Candidate c = MakeSeedCandidate(f, layout, full);
  c.set_proposer("embedded");
  auto [it, fresh] = configs_.try_emplace(c.id());
  if (fresh) {
    it->second.family = &f;
    it->second.params = std::move(full);
    it->second.candidate = std::move(c);
  }
  known->second = &it->second;
  return &it->second;
}

Config* SearchState::ConfigOf(const std::string& id) {
  auto it = configs_.find(id);
  if (it != configs_.end()) return &it->second;
  absl::StatusOr<v1::Candidate> c = history_->GetCandidate(id);
  const SeedFamily* f = c.ok() ? FamilyOf(*c) : nullptr;
  if (f == nullptr) return nullptr;
  Config* made = Intern(*f, c->layout(), KnobParams(c->params().begin(), c->params().end()));
  return made->candidate.id() == id ? made : nullptr;
}

std::vector<Config*> SearchState::BuiltConfigs(v1::Layout layout) {
  std::vector<Config*> out;
  for (auto& [id, c] : configs_) {
    if (c.candidate.layout() == layout && !c.failed && c.build && c.build->verdict() == v1::VERDICT_PASSED) {
      out.push_back(&c);
    }
  }
  return out;
}

const SeedFamily* SearchState::FamilyOf(const v1::Candidate& c) const {
  for (const SeedFamily& f : seeds_) {
    if (f.name == c.family()) return &f;
  }
  return nullptr;
}

std::vector<Config*> SearchState::SeedConfigs() {
  std::vector<v1::Layout> layouts;
  for (const ProblemState& p : problems_) {
    if (std::find(layouts.begin(), layouts.end(), p.spec.layout) == layouts.end()) layouts.push_back(p.spec.layout);
  }
  std::vector<Config*> out;
  for (const SeedFamily& f : seeds_) {
    if (!f.searchable) continue;
    for (v1::Layout l : layouts) {
      if (std::find(f.layouts.begin(), f.layouts.end(), l) == f.layouts.end()) continue;
      out.push_back(Intern(f, l, {}));
      for (const KnobParams& s : f.suggested) {
        if (CheckConfig(f, l, s).ok()) out.push_back(Intern(f, l, s));
      }
    }
  }
  return out;
}

const std::vector<std::pair<const SeedFamily*, KnobParams>>& SearchState::Space(v1::Layout layout) {
  auto [it, fresh] = spaces_.try_emplace(layout);
  if (fresh) {
    for (const SeedFamily& f : seeds_) {
      if (f.model.empty()) continue;  // a family without a cost model is searched only at its seeds
      if (std::find(f.layouts.begin(), f.layouts.end(), layout) == f.layouts.end()) continue;
      for (KnobParams& p : LegalConfigs(f, layout)) it->second.emplace_back(&f, std::move(p));
    }
  }
  return it->second;
}

// A seed suggestion is sent to every problem of its layout, and a split-16
// tile on 12288x8192 asks for 6 GiB, which the runner refuses unrun.
bool SearchState::WorkspaceFits(const Config& c, const ProblemState& p) const {
  absl::StatusOr<Estimate> e = Predict(*c.family, c.candidate.layout(), c.params, p.spec.shape, model_.device());
  return !e.ok() || e->partial_bytes <= options_.max_workspace_bytes;
}

void SearchState::SetProblemKeys() {
  const v1::RunnerInfo info = *device_;
  for (ProblemState& p : problems_) p.problem = MakeProblem(info.gpu(), info.arch(), p.spec.shape, p.spec.layout);
  model_ = CostModel([&] {
    DeviceModel d = options_.device;
    if (info.sm_count() > 0) d.sms = info.sm_count();
    return d;
  }());
}

absl::Status SearchState::LoadHistory() {
  SetProblemKeys();
  for (ProblemState& p : problems_) {  // the store has everything, the probe's too
    p.measured.clear();
    p.measured_knobs.clear();
    p.tried = 0;
    p.best_us = 0;
    p.best_id.clear();
    p.best_verified = false;
  }
  std::map<std::string, std::optional<v1::Candidate>> candidates;
  for (ProblemState& p : problems_) {
    absl::StatusOr<std::vector<StoredMeasurement>> h = history_->SearchHistory(p.problem);
    if (!h.ok()) return h.status();
    for (const StoredMeasurement& m : *h) {
      const std::string& id = m.measurement.candidate_id();
      auto [it, fresh] = candidates.try_emplace(id);
      if (fresh) {
        absl::StatusOr<v1::Candidate> c = history_->GetCandidate(id);
        if (c.ok()) it->second = *c;
      }
      ++resumed_;
      Record(p, it->second ? &*it->second : nullptr, m.measurement, /*fresh=*/false);
    }
  }
  return absl::OkStatus();
}

// Whether a candidate was made from its family's current source (true for
// candidates of no known family). A measurement of an earlier source still
// informs the model, but cannot be a problem's best: the winners are what
// today's seeds build.
bool SearchState::Current(const v1::Candidate* c) {
  const SeedFamily* f = c ? FamilyOf(*c) : nullptr;
  if (f == nullptr) return true;
  auto [it, fresh] = current_.try_emplace(c->id());
  if (fresh) {
    const Config* now = Intern(*f, c->layout(), KnobParams(c->params().begin(), c->params().end()));
    it->second = now->candidate.id() == c->id();
  }
  return it->second;
}

bool SearchState::CurrentId(const std::string& id) {
  auto it = current_.find(id);
  if (it != current_.end()) return it->second;
  absl::StatusOr<v1::Candidate> c = history_->GetCandidate(id);
  return Current(c.ok() ? &*c : nullptr);
}

void SearchState::Record(ProblemState& p, const v1::Candidate* c, const v1::Measurement& m, bool fresh) {
  const bool passed = m.verdict() == v1::VERDICT_PASSED;
  // A row measured before the job's figure existed (a store from before
  // graph-replay timing) informs the model but leaves the configuration to
  // be measured again, by the carry stage first.
  const bool lacks_figure = PredatesFigure(m, options_.figure);
  if (!lacks_figure) p.measured.insert(m.candidate_id());
  ++p.tried;
  if (passed && Current(c)) {
    // The speedup pairs a kernel with the baselines timed in its own
    // process: cuBLAS's figure moves between runs (power and clocks).
    const double us = RankingUs(m, options_.figure);
    // A best's later measurements (its re-checks) leave its selection
    // figure alone; the verified one (the verify stage's re-measurement)
    // gives the figures reported.
    if (m.candidate_id() == p.best_id) {
      if (m.verified()) Verified(p, m, fresh);
    } else if (Beats(us, p.best_us)) {
      Improve(p, c, m, us, fresh);
    }
  }
  if (fresh) result_.curve.push_back({p.name, p.tried, p.Speedup(), Seconds(), stage_});
  ObserveModel(p, c, m, lacks_figure);
}

// A new best of the problem, at `us`.
void SearchState::Improve(ProblemState& p, const v1::Candidate* c, const v1::Measurement& m, double us,
                          bool fresh) {
  const double before = p.Speedup();
  if (fresh && Beats(us, p.best_us * kGain)) ++improved_;
  p.best_us = us;
  p.baseline_us = BestBaselineUs(m, options_.figure);
  p.best_id = m.candidate_id();
  p.best_verified = false;
  if (m.verified()) Verified(p, m, fresh);
  if (fresh) {
    const ProgressFn& out = new_best_lines_ ? new_best_lines_ : progress_;
    out(absl::StrFormat("[%s] %-22s %.3fx -> %.3fx  %s  (%.2f us; best baseline %.2f us)", stage_, p.name,
                        before, p.Speedup(), c ? c->name() : m.candidate_id(), us, p.baseline_us));
  }
}

// The measurement as the cost model's observation, and a passed one's knobs
// as measured on the problem under any source.
void SearchState::ObserveModel(ProblemState& p, const v1::Candidate* c, const v1::Measurement& m,
                               bool lacks_figure) {
  const SeedFamily* f = c ? FamilyOf(*c) : nullptr;
  if (f == nullptr) return;
  const bool passed = m.verdict() == v1::VERDICT_PASSED;
  KnobParams params(c->params().begin(), c->params().end());
  // A failure (a host-side bug, a build that a fix will mend) says nothing about
  // the family's later sources: only a passed measurement lets the seed stage skip.
  if (passed && !lacks_figure) p.measured_knobs.insert(ConfigKey(*f, c->layout(), params));
  absl::StatusOr<Estimate> e = Predict(*f, c->layout(), params, p.spec.shape, model_.device());
  if (e.ok()) {
    model_.Observe({f->name, params, p.spec.shape, e->us, passed ? m.timings().device().median_us() : 0.0});
  }
}

// The store's BestKernel rule, so a job and the store name the same kernel:
// normally the best just verified; an earlier winner instead when its
// re-measurement beat the new one's.
void SearchState::FastestVerified(ProblemState& p) {
  const std::vector<StoredMeasurement> history = History(p);
  const std::set<std::string> failed = Failed(history);
  for (const StoredMeasurement& m : history) {
    const v1::Measurement& x = m.measurement;
    if (x.verdict() != v1::VERDICT_PASSED || !x.verified() || failed.count(x.candidate_id()) ||
        !CurrentId(x.candidate_id())) {
      continue;
    }
    if (Beats(RankingUs(x, options_.figure), p.best_verified ? p.verified_us : 0)) {
      p.best_id = x.candidate_id();
      Verified(p, x, m.job_id == job_id_);
    }
  }
}

void SearchState::FallBack(ProblemState& p) {
  p.best_id.clear();
  p.best_us = 0;
  p.best_verified = false;
  const std::vector<StoredMeasurement> history = History(p);
  const std::set<std::string> failed = Failed(history);
  for (const StoredMeasurement& m : history) {
    const v1::Measurement& x = m.measurement;
    const double us = RankingUs(x, options_.figure);
    if (!failed.count(x.candidate_id()) && Beats(us, p.best_us) && CurrentId(x.candidate_id())) {
      p.best_us = us;
      p.baseline_us = BestBaselineUs(x, options_.figure);
      p.best_id = x.candidate_id();
    }
  }
  for (const StoredMeasurement& m : history) {
    if (m.measurement.candidate_id() == p.best_id && m.measurement.verified()) {
      Verified(p, m.measurement, m.job_id == job_id_);
    }
  }
}

bool SearchState::NextToVerify(ProblemState& p, double verified_us) {
  const std::vector<StoredMeasurement> history = History(p);
  const std::set<std::string> failed = Failed(history);
  std::set<std::string> verified;
  for (const StoredMeasurement& m : history) {
    if (m.measurement.verified()) verified.insert(m.measurement.candidate_id());
  }
  const v1::Measurement* next = nullptr;
  double next_us = verified_us;
  for (const StoredMeasurement& m : history) {
    const v1::Measurement& x = m.measurement;
    const double us = RankingUs(x, options_.figure);
    if (!failed.count(x.candidate_id()) && !verified.count(x.candidate_id()) && Beats(us, next_us) &&
        CurrentId(x.candidate_id())) {
      next = &x;
      next_us = us;
    }
  }
  if (next == nullptr) return false;
  p.best_id = next->candidate_id();
  p.best_us = next_us;
  p.baseline_us = BestBaselineUs(*next, options_.figure);
  p.best_verified = false;
  return true;
}

void SearchState::Verified(ProblemState& p, const v1::Measurement& m, bool here) {
  p.best_verified = true;
  p.verified_us = FigureUs(m.timings(), options_.figure);
  p.verified_baseline_us = BestBaselineUs(m, options_.figure);
  p.verified_here = here;
}

std::vector<StoredMeasurement> SearchState::History(const ProblemState& p) {
  absl::StatusOr<std::vector<StoredMeasurement>> h = history_->SearchHistory(p.problem);
  return h.ok() ? *h : std::vector<StoredMeasurement>{};
}

std::set<std::string> SearchState::Failed(const std::vector<StoredMeasurement>& history) {
  std::set<std::string> out;
  for (const StoredMeasurement& m : history) {
    if (m.measurement.verdict() != v1::VERDICT_PASSED) out.insert(m.measurement.candidate_id());
  }
  return out;
}

std::string SearchState::StatusLine() const {
  int ahead = 0;
  for (const ProblemState& p : problems_) ahead += p.Speedup() >= 1.0;
  const double minutes = std::max(Seconds(), 1.0) / 60;
  return absl::StrFormat(
      "[%s] %.1f min: %d built (%.1f/min), %d measured (%.1f/min); at or above the best "
      "baseline on %d/%d problems; geomean %.3fx",
      stage_, Seconds() / 60, result_.candidates_built, result_.candidates_built / minutes,
      result_.measurements, result_.measurements / minutes, ahead, problems_.size(), Geomean());
}

double SearchState::Geomean() const {
  double log_sum = 0;
  int n = 0;
  for (const ProblemState& p : problems_) {
    if (p.Speedup() <= 0) continue;
    log_sum += std::log(p.Speedup());
    ++n;
  }
  return n == 0 ? 0 : std::exp(log_sum / n);
}

SearchResult SearchState::Finish() {
  result_.wall_seconds = Seconds();
  for (ProblemState& p : problems_) {
    v1::ProblemProgress pp;
    *pp.mutable_problem() = p.problem;
    pp.set_candidates_tried(p.tried);
    if (p.best_verified) {  // the figures of its fresh re-measurement
      pp.set_best_candidate_id(p.best_id);
      pp.set_best_us(p.verified_us);
      pp.set_speedup(p.VerifiedSpeedup());
      pp.set_best_baseline_us(p.verified_baseline_us);
    } else {
      pp.set_best_baseline_us(p.baseline_us);
    }
    result_.problems.push_back(pp);
  }
  return result_;
}

}  // namespace anvil
