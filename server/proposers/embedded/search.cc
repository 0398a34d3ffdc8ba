#include "server/proposers/embedded/search.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "reward/reward.h"
#include "seeds/space.h"

namespace anvil {
namespace {

using Clock = std::chrono::steady_clock;

// A configuration of a seed family for one layout, as a candidate.
struct Config {
  const SeedFamily* family = nullptr;
  KnobParams params;
  v1::Candidate candidate;
  std::optional<v1::Build> build;  // once built
  bool failed = false;             // did not build, or failed to load
};

// What the search knows about one problem.
struct ProblemState {
  ShapeSpec spec;
  v1::Problem problem;             // with the GPU, once known
  std::string name;                // "MxNxK nt"
  std::set<std::string> measured;  // candidate ids measured on it (any verdict)
  std::set<std::string> measured_knobs;  // ConfigKey()s passed on it, under any source
  int tried = 0;
  double baseline_us = 0;          // best baseline, by the search's figure
  double best_us = std::numeric_limits<double>::infinity();  // the fastest measurement's
  std::string best_id;             // candidate id
  bool best_verified = false;
  // The verify stage's re-measurement of best_id: what is reported.
  double verified_us = 0;
  double verified_baseline_us = 0;
  bool verified_here = false;      // that re-measurement is this job's
  // The search's view (selects the best): biased low, the fastest of many.
  double Speedup() const { return best_id.empty() || best_us <= 0 ? 0 : baseline_us / best_us; }
  double VerifiedSpeedup() const {
    return !best_verified || verified_us <= 0 ? 0 : verified_baseline_us / verified_us;
  }
};

class Search {
 public:
  Search(const std::vector<SeedFamily>& seeds, const std::vector<ShapeSpec>& problems,
         const std::string& job_id, RoundChannel& channel, const SearchOptions& options,
         const ProgressFn& progress)
      : seeds_(seeds), job_id_(job_id), channel_(channel), history_(channel.history()), options_(options),
        progress_(progress), model_(options.device), start_(Now()),
        stage_deadline_(options.seeds_only ? options.budget_seconds
                                           : options.budget_seconds *
                                                 (1 - std::clamp(options.evolve_share, 0.0, 1.0))) {
    for (const ShapeSpec& s : problems) {
      ProblemState p;
      p.spec = s;
      p.name = absl::StrCat(ShapeName(s.shape), " ", LayoutName(s.layout));
      problems_.push_back(std::move(p));
    }
  }

  absl::StatusOr<SearchResult> Run() {
    stage_ = "seeds";
    std::vector<Config*> seeds_list;
    for (const SeedFamily& f : seeds_) {
      if (!f.searchable) continue;
      for (v1::Layout l : Layouts()) {
        if (std::find(f.layouts.begin(), f.layouts.end(), l) == f.layouts.end()) continue;
        seeds_list.push_back(Intern(f, l, {}));
        for (const KnobParams& s : f.suggested) {
          if (CheckConfig(f, l, s).ok()) seeds_list.push_back(Intern(f, l, s));
        }
      }
    }
    if (absl::Status st = LearnGpu(seeds_list); !st.ok()) return st;
    if (absl::Status st = LoadHistory(); !st.ok()) return st;
    progress_(absl::StrFormat("resumed from the store: %d measurements on these problems, "
                              "%d model observations", resumed_, model_.observations()));

    if (!options_.seeds_only) {
      // Each problem's fastest configurations, first those measured here with
      // an earlier source of their family, then another GPU model's: before the
      // seeds, so a short budget still measures them.
      std::vector<std::pair<std::string, std::string>> carry = {{"carry", problems_.front().problem.gpu()}};
      if (!options_.transfer_from.empty() && options_.transfer_from != carry[0].second) {
        carry.emplace_back("transfer", options_.transfer_from);
      }
      for (const auto& [stage, gpu] : carry) {
        stage_ = stage;
        absl::StatusOr<std::map<Config*, std::vector<ProblemState*>>> t = TransferPlan(gpu);
        if (!t.ok()) return t.status();
        if (absl::Status st = Execute(*t); !st.ok()) return st;
      }
    }

    // Every seed configuration on every problem of its layout, except where the
    // same knobs were measured under an earlier source of the family (the model
    // has those observations, and the carry stage re-measured each problem's
    // fastest); a seeds-only run measures them all.
    stage_ = "seeds";
    std::map<Config*, std::vector<ProblemState*>> plan;
    int known = 0;
    for (Config* c : seeds_list) {
      for (ProblemState& p : problems_) {
        if (p.spec.layout != c->candidate.layout() || !WorkspaceFits(*c, p)) continue;
        if (!options_.seeds_only && !p.measured.count(c->candidate.id()) &&
            p.measured_knobs.count(ConfigKey(*c->family, c->candidate.layout(), c->params))) {
          ++known;
          continue;
        }
        plan[c].push_back(&p);
      }
    }
    if (known > 0) {
      progress_(absl::StrFormat("[seeds] %d (configuration, problem) pairs skipped: measured "
                                "under an earlier source",
                                known));
    }
    if (absl::Status st = Execute(plan); !st.ok()) return st;

    if (!options_.seeds_only) {
      stage_ = "screen";
      if (absl::Status st = Execute(ScreenPlan()); !st.ok()) return st;
      stage_ = "widen";
      if (absl::Status st = Execute(WidenPlan()); !st.ok()) return st;
      stage_deadline_ = options_.budget_seconds;
      stage_ = "specialise";
      if (absl::Status st = Execute(SpecialisePlan()); !st.ok()) return st;
      // A generation that improves nothing does not end the stage at once: the next
      // takes the leaders' next-ranked neighbours (on the H100 a search that
      // stopped at the first such generation left a third of its budget unused).
      int idle = 0;  // generations in a row that moved no problem's best by 0.5%
      for (int g = 1; g <= options_.generations && !OverBudget(); ++g) {
        stage_ = absl::StrCat("evolve-", g);
        std::map<Config*, std::vector<ProblemState*>> evolve = EvolvePlan();
        if (evolve.empty()) break;
        improved_ = 0;
        if (absl::Status st = Execute(evolve); !st.ok()) return st;
        idle = improved_ == 0 ? idle + 1 : 0;
        if (idle >= std::max(1, options_.evolve_patience)) break;  // converged
      }
    }
    stage_ = "verify";
    if (absl::Status st = VerifyWinners(); !st.ok()) return st;
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

 private:
  std::vector<v1::Layout> Layouts() const {
    std::vector<v1::Layout> out;
    for (const ProblemState& p : problems_) {
      if (std::find(out.begin(), out.end(), p.spec.layout) == out.end()) out.push_back(p.spec.layout);
    }
    return out;
  }

  Clock::time_point Now() const { return options_.clock ? options_.clock() : Clock::now(); }
  double Seconds() const { return std::chrono::duration<double>(Now() - start_).count(); }
  // Whether the current stage must stop: the whole budget is spent, or stages
  // 0-2 have spent theirs (the rest is the evolve stage's).
  bool OverBudget() {
    const double s = Seconds();
    if (s >= options_.budget_seconds || channel_.final_phase()) {
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

  // Whether the configuration's split-K partials on the problem stay within the
  // runner's workspace cap, by the family's model (true when it cannot tell):
  // a seed suggestion is sent to every problem of its layout, and a split-16
  // tile on 12288x8192 asks for 6 GiB, which the runner refuses unrun.
  bool WorkspaceFits(const Config& c, const ProblemState& p) const {
    absl::StatusOr<Estimate> e = Predict(*c.family, c.candidate.layout(), c.params, p.spec.shape, model_.device());
    return !e.ok() || e->partial_bytes <= options_.max_workspace_bytes;
  }

  // The unique Config for (family, layout, params).
  Config* Intern(const SeedFamily& f, v1::Layout layout, const KnobParams& params) {
    v1::Candidate c = MakeSeedCandidate(f, layout, WithDefaults(f, params));
    c.set_proposer("embedded");
    auto [it, fresh] = configs_.try_emplace(c.id());
    if (fresh) {
      it->second.family = &f;
      it->second.params = WithDefaults(f, params);
      it->second.candidate = std::move(c);
    }
    return &it->second;
  }

  // The GPU is part of the problem key: learn it by measuring the first seed
  // on the first problem of its layout (a real, stored measurement).
  absl::Status LearnGpu(const std::vector<Config*>& seeds_list) {
    for (Config* c : seeds_list) {
      for (ProblemState& p : problems_) {
        if (p.spec.layout != c->candidate.layout()) continue;
        if (absl::Status st = Execute({{c, {&p}}}, /*within_budget=*/false); !st.ok()) return st;
        if (channel_.device()) break;
      }
      if (channel_.device()) break;
    }
    if (!channel_.device()) {
      return absl::UnavailableError("no seed configuration could be built and run on this GPU");
    }
    return absl::OkStatus();
  }

  void SetProblemKeys() {
    const v1::RunnerInfo info = *channel_.device();
    for (ProblemState& p : problems_) p.problem = MakeProblem(info.gpu(), info.arch(), p.spec.shape, p.spec.layout);
    model_ = CostModel([&] {
      DeviceModel d = options_.device;
      if (info.sm_count() > 0) d.sms = info.sm_count();
      return d;
    }());
  }

  // Reads back every measurement of these problems: what was tried, the
  // bests, and the model's observations.
  absl::Status LoadHistory() {
    SetProblemKeys();
    for (ProblemState& p : problems_) {  // the store has everything, LearnGpu's too
      p.measured.clear();
      p.measured_knobs.clear();
      p.tried = 0;
      p.best_us = std::numeric_limits<double>::infinity();
      p.best_id.clear();
      p.best_verified = false;
    }
    std::map<std::string, std::optional<v1::Candidate>> candidates;
    for (ProblemState& p : problems_) {
      absl::StatusOr<std::vector<StoredMeasurement>> h = history_.SearchHistory(p.problem);
      if (!h.ok()) return h.status();
      for (const StoredMeasurement& m : *h) {
        const std::string& id = m.measurement.candidate_id();
        auto [it, fresh] = candidates.try_emplace(id);
        if (fresh) {
          absl::StatusOr<v1::Candidate> c = history_.GetCandidate(id);
          if (c.ok()) it->second = *c;
        }
        ++resumed_;
        Record(p, it->second ? &*it->second : nullptr, m.measurement, /*fresh=*/false);
      }
    }
    return absl::OkStatus();
  }

  const SeedFamily* FamilyOf(const v1::Candidate& c) const {
    for (const SeedFamily& f : seeds_) {
      if (f.name == c.family()) return &f;
    }
    return nullptr;
  }

  // Whether a candidate was made from its family's current source (true for
  // candidates of no known family). A measurement of an earlier source still
  // informs the model, but cannot be a problem's best: the winners are what
  // today's seeds build.
  bool Current(const v1::Candidate* c) {
    const SeedFamily* f = c ? FamilyOf(*c) : nullptr;
    if (f == nullptr) return true;
    auto [it, fresh] = current_.try_emplace(c->id());
    if (fresh) {
      const Config* now = Intern(*f, c->layout(), KnobParams(c->params().begin(), c->params().end()));
      it->second = now->candidate.id() == c->id();
    }
    return it->second;
  }

  bool CurrentId(const std::string& id) {
    auto it = current_.find(id);
    if (it != current_.end()) return it->second;
    absl::StatusOr<v1::Candidate> c = history_.GetCandidate(id);
    return Current(c.ok() ? &*c : nullptr);
  }

  // Takes one measurement into the problem's state and the cost model.
  void Record(ProblemState& p, const v1::Candidate* c, const v1::Measurement& m, bool fresh) {
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
      const double us = FigureUs(m.timings(), options_.figure);
      // A best's later measurements (its re-checks) leave its selection
      // figure alone; the verified one (the verify stage's re-measurement)
      // gives the figures reported.
      if (m.candidate_id() == p.best_id) {
        if (m.verified()) Verified(p, m, fresh);
      } else if (us > 0 && us < p.best_us) {
        const double before = p.Speedup();
        if (fresh && us < p.best_us * 0.995) ++improved_;
        p.best_us = us;
        p.baseline_us = BestBaselineUs(m, options_.figure);
        p.best_id = m.candidate_id();
        p.best_verified = false;
        if (m.verified()) Verified(p, m, fresh);
        if (fresh) {
          progress_(absl::StrFormat("[%s] %-22s %.3fx -> %.3fx  %s  (%.2f us; best baseline %.2f us)",
                                    stage_, p.name, before, p.Speedup(), c ? c->name() : m.candidate_id(),
                                    us, p.baseline_us));
        }
      }
    }
    if (fresh) result_.curve.push_back({p.name, p.tried, p.Speedup(), Seconds(), stage_});
    const SeedFamily* f = c ? FamilyOf(*c) : nullptr;
    if (f == nullptr) return;
    KnobParams params(c->params().begin(), c->params().end());
    // A failure (a host-side bug, a build that a fix will mend) says nothing about
    // the family's later sources: only a passed measurement lets the seed stage skip.
    if (passed && !lacks_figure) p.measured_knobs.insert(ConfigKey(*f, c->layout(), params));
    absl::StatusOr<Estimate> e = Predict(*f, c->layout(), params, p.spec.shape, model_.device());
    if (e.ok()) {
      model_.Observe({f->name, params, p.spec.shape, e->us,
                      passed ? m.timings().device().median_us() : 0.0});
    }
  }

  // The winner reported: of the verified re-measurements of today's
  // candidates on the problem, the fastest (the store's BestKernel rule, so a
  // job and the store name the same kernel), leaving out any candidate that
  // has failed on the problem since. Normally the best just verified; an
  // earlier winner instead when its re-measurement beat the new one's.
  void FastestVerified(ProblemState& p) {
    const std::vector<StoredMeasurement> history = History(p);
    const std::set<std::string> failed = Failed(history);
    for (const StoredMeasurement& m : history) {
      const v1::Measurement& x = m.measurement;
      if (x.verdict() != v1::VERDICT_PASSED || !x.verified() || failed.count(x.candidate_id()) ||
          !CurrentId(x.candidate_id())) {
        continue;
      }
      const double us = FigureUs(x.timings(), options_.figure);
      if (us > 0 && (!p.best_verified || us < p.verified_us)) {
        p.best_id = x.candidate_id();
        Verified(p, x, m.job_id == job_id_);
      }
    }
  }

  void Verified(ProblemState& p, const v1::Measurement& m, bool here) {
    p.best_verified = true;
    p.verified_us = FigureUs(m.timings(), options_.figure);
    p.verified_baseline_us = BestBaselineUs(m, options_.figure);
    p.verified_here = here;
  }

  // Proposes each configuration for its problems that have not seen it:
  // compile once, measure many. The configurations with the most problems go
  // first (then by id); the coordinator builds them in rounds and measures
  // them until the stage's deadline (Proposal::measure_by), so a budget that
  // ends mid-stage leaves at most two rounds built and not measured.
  absl::Status Execute(const std::map<Config*, std::vector<ProblemState*>>& plan,
                       bool within_budget = true) {
    std::vector<std::pair<size_t, Config*>> todo;
    for (const auto& [c, ps] : plan) {
      size_t n = 0;
      for (ProblemState* p : ps) n += !p->measured.count(c->candidate.id());
      if (n > 0 && !c->failed) todo.emplace_back(n, c);
    }
    std::sort(todo.begin(), todo.end(), [](const auto& a, const auto& b) {  // deterministic
      return a.first != b.first ? a.first > b.first : a.second->candidate.id() < b.second->candidate.id();
    });
    if (todo.empty() || (within_budget && OverBudget())) return absl::OkStatus();
    progress_(absl::StrFormat("[%s] %d configurations to build and measure", stage_, todo.size()));
    std::vector<Config*> all;
    for (const auto& [n, c] : todo) all.push_back(c);
    if (absl::Status st = ExchangeRound(all, plan, within_budget); !st.ok()) return st;
    if (within_budget) OverBudget();  // says so when the stage or the budget was cut
    progress_(Status());
    return absl::OkStatus();
  }

  // Hands a stage's plan to the coordinator (which builds it in rounds, the
  // next building while this one is measured, measures each configuration on
  // its problems until the stage's deadline, and stores everything) and takes
  // in what came back. A configuration whose build failed in an earlier run
  // is marked failed instead of proposed; a build that fails now marks it failed.
  absl::Status ExchangeRound(const std::vector<Config*>& round,
                             const std::map<Config*, std::vector<ProblemState*>>& plan,
                             bool within_budget) {
    const double deadline = std::min(options_.budget_seconds, stage_deadline_);
    std::vector<Proposal> proposals;
    std::vector<Config*> configs;
    for (Config* c : round) {
      if (c->failed) continue;
      absl::StatusOr<std::optional<v1::Build>> before = history_.LatestBuild(c->candidate.id());
      if (before.ok() && *before && (*before)->verdict() != v1::VERDICT_PASSED) {
        c->failed = true;
        continue;
      }
      Proposal pr = ProposalFor(*c, plan.at(c));
      if (pr.problems.empty()) continue;
      if (within_budget) pr.measure_by = channel_.elapsed_at_start() + deadline;
      proposals.push_back(std::move(pr));
      configs.push_back(c);
    }
    if (proposals.empty()) return absl::OkStatus();
    const Clock::time_point m0 = Now();
    absl::Status st = channel_.Exchange(std::move(proposals), [&](size_t i, const Observation& o) {
      if (problems_.front().problem.gpu().empty() && channel_.device()) SetProblemKeys();
      Take(*configs[i], o);
    });
    result_.measure_seconds += std::chrono::duration<double>(Now() - m0).count();
    return st;
  }

  // The configuration for those of `targets` that have not seen it, each
  // once: a plan may name a problem twice (a seed suggestion that is the
  // default; widen sending two problems' shared leader to a third), and one
  // runner measuring a problem twice also tunes cuBLASLt for it twice and
  // keeps the second tuning, however slower.
  Proposal ProposalFor(const Config& c, const std::vector<ProblemState*>& targets) {
    Proposal pr;
    pr.candidate = c.candidate;
    pr.stage = stage_;
    for (ProblemState* p : targets) {
      const int index = static_cast<int>(p - problems_.data());
      if (!p->measured.count(c.candidate.id()) &&
          std::find(pr.problems.begin(), pr.problems.end(), index) == pr.problems.end()) {
        pr.problems.push_back(index);
      }
    }
    return pr;
  }

  // Takes one observation: a failed build marks the configuration failed,
  // each measurement goes into its problem's state and the cost model.
  void Take(Config& c, const Observation& o) {
    if (o.build) {
      c.build = *o.build;
      ++result_.candidates_built;
    }
    if (o.outcome == Outcome::kBuildFailed) {
      c.failed = true;
      ++result_.build_failures;
      progress_(absl::StrCat("[", stage_, "] ", c.candidate.name(), " did not build: ",
                             v1::Verdict_Name(o.build->verdict()), " ", o.build->error().substr(0, 300)));
      return;
    }
    bool all_failed = !o.measurements.empty();
    for (size_t j = 0; j < o.measurements.size() && j < o.measured_on.size(); ++j) {
      ++result_.measurements;
      Record(problems_[o.measured_on[j]], &c.candidate, o.measurements[j], /*fresh=*/true);
      all_failed &= o.measurements[j].verdict() != v1::VERDICT_PASSED;
    }
    if (all_failed) {
      progress_(absl::StrCat("[", stage_, "] ", c.candidate.name(), ": ",
                             v1::Verdict_Name(o.measurements[0].verdict()), " ", o.measurements[0].reason()));
    }
  }

  std::string Status() const {
    int ahead = 0;
    for (const ProblemState& p : problems_) ahead += p.Speedup() >= 1.0;
    const double minutes = std::max(Seconds(), 1.0) / 60;
    return absl::StrFormat(
        "[%s] %.1f min: %d built (%.1f/min), %d measured (%.1f/min); at or above the best "
        "baseline on %d/%d problems; geomean %.3fx",
        stage_, Seconds() / 60, result_.candidates_built, result_.candidates_built / minutes,
        result_.measurements, result_.measurements / minutes, ahead, problems_.size(), Geomean());
  }

  double Geomean() const {
    double log_sum = 0;
    int n = 0;
    for (const ProblemState& p : problems_) {
      if (p.Speedup() <= 0) continue;
      log_sum += std::log(p.Speedup());
      ++n;
    }
    return n == 0 ? 0 : std::exp(log_sum / n);
  }

  // The legal configurations of every family for a layout (late knobs at
  // their defaults), enumerated once.
  const std::vector<std::pair<const SeedFamily*, KnobParams>>& Space(v1::Layout layout) {
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

  // Ranks configurations for a problem: unmeasured, waste within bounds,
  // cheapest by the first-principles model, then the best `refine` of those
  // re-ranked by the refined model.
  // With `diverse`, at most one configuration per (family, tile, split, variant), so
  // a screen spends its measurements on different shapes of work, not on
  // variants the first-principles model cannot tell apart.
  std::vector<std::pair<double, Config*>> Rank(
      ProblemState& p, const std::vector<std::pair<const SeedFamily*, KnobParams>>& space,
      size_t keep, bool diverse) {
    std::vector<std::tuple<double, double, const SeedFamily*, const KnobParams*>> raw;
    double tightest = std::numeric_limits<double>::infinity();
    for (const auto& [f, params] : space) {
      absl::StatusOr<Estimate> e = Predict(*f, p.spec.layout, params, p.spec.shape, model_.device());
      if (!e.ok() || e->partial_bytes > options_.max_workspace_bytes) continue;
      tightest = std::min(tightest, e->waste);
      raw.emplace_back(e->us, e->waste, f, &params);
    }
    std::vector<std::tuple<double, const SeedFamily*, const KnobParams*>> kept;
    for (const auto& [us, waste, f, params] : raw) {
      if (waste <= tightest + options_.max_waste) kept.emplace_back(us, f, params);
    }
    const size_t refine = std::min(kept.size(), std::max<size_t>(keep * 40, 200));
    std::partial_sort(kept.begin(), kept.begin() + refine, kept.end());
    std::vector<std::pair<double, Config*>> ranked;
    for (size_t i = 0; i < refine; ++i) {
      const auto& [us, f, params] = kept[i];
      Config* c = Intern(*f, p.spec.layout, *params);
      if (c->failed || p.measured.count(c->candidate.id())) continue;
      absl::StatusOr<Estimate> e = model_.Refined(*f, p.spec.layout, *params, p.spec.shape);
      ranked.emplace_back(e.ok() ? e->us : us, c);
    }
    std::sort(ranked.begin(), ranked.end(), ByTimeThenId);
    std::vector<std::pair<double, Config*>> out;
    std::set<std::string> kinds;
    for (const auto& [us, c] : ranked) {
      if (out.size() == keep) break;
      if (diverse && !kinds.insert(WorkKind(*c)).second) continue;
      out.emplace_back(us, c);
    }
    return out;
  }

  // Orders (time, configuration) pairs; ties by candidate id, so a search's
  // course does not depend on where its configurations were allocated.
  static bool ByTimeThenId(const std::pair<double, Config*>& a, const std::pair<double, Config*>& b) {
    return a.first != b.first ? a.first < b.first : a.second->candidate.id() < b.second->candidate.id();
  }

  // A configuration's tile: its family and the CTA tile's rows and columns.
  static std::string TileOf(const Config& c) {
    absl::StatusOr<RuleVars> v = KnobVars(*c.family, c.candidate.layout(), c.params);
    if (!v.ok()) return c.candidate.id();
    return absl::StrCat(c.family->name, ":", ModelTerm(*c.family, *v, "tile_m", 0), "x",
                        ModelTerm(*c.family, *v, "tile_n", 0));
  }

  // Its kind of work: the tile, the K split and the variant (e.g. persistent).
  static std::string WorkKind(const Config& c) {
    absl::StatusOr<RuleVars> v = KnobVars(*c.family, c.candidate.layout(), c.params);
    if (!v.ok()) return c.candidate.id();
    return absl::StrCat(TileOf(c), "/", ModelTerm(*c.family, *v, "split_k", 1), "/",
                        ModelTerm(*c.family, *v, "variant", 0));
  }

  std::map<Config*, std::vector<ProblemState*>> ScreenPlan() {
    std::map<Config*, std::vector<ProblemState*>> plan;
    for (ProblemState& p : problems_) {
      for (const auto& [us, c] : Rank(p, Space(p.spec.layout), options_.screen_per_problem, /*diverse=*/true)) {
        plan[c].push_back(&p);
      }
    }
    return plan;
  }

  // The problem's correct candidates of today's sources, fastest first, each
  // once, with its fastest figure.
  std::vector<std::pair<double, Config*>> Passed(const ProblemState& p) {
    std::vector<std::pair<double, Config*>> passed;
    for (const StoredMeasurement& m : History(p)) {
      if (m.measurement.verdict() != v1::VERDICT_PASSED) continue;
      Config* c = ConfigOf(m.measurement.candidate_id());
      if (c == nullptr) continue;  // no family, or its source changed since
      const double us = FigureUs(m.measurement.timings(), options_.figure);
      if (us > 0) passed.emplace_back(us, c);  // without the figure (not capturable): no rank
    }
    std::sort(passed.begin(), passed.end(), ByTimeThenId);
    std::vector<std::pair<double, Config*>> out;
    std::set<const Config*> seen;
    for (const auto& [us, c] : passed) {
      if (seen.insert(c).second) out.emplace_back(us, c);
    }
    return out;
  }

  std::vector<Config*> Leaders(const ProblemState& p, size_t n) {
    std::vector<Config*> out;
    for (const auto& [us, c] : Passed(p)) {
      if (out.size() >= n) break;
      out.push_back(c);
    }
    return out;
  }

  std::vector<StoredMeasurement> History(const ProblemState& p) {
    absl::StatusOr<std::vector<StoredMeasurement>> h = history_.SearchHistory(p.problem);
    return h.ok() ? *h : std::vector<StoredMeasurement>{};
  }

  // Each problem's fastest distinct configurations on the GPU model `gpu`
  // (same problem otherwise), as configurations of today's families: one
  // whose knobs or rules have changed since is skipped, a knob added since
  // takes its default. Those already measured with today's source are not
  // measured again (Execute).
  absl::StatusOr<std::map<Config*, std::vector<ProblemState*>>> TransferPlan(const std::string& gpu) {
    std::map<Config*, std::vector<ProblemState*>> plan;
    int found = 0;
    for (ProblemState& p : problems_) {
      v1::Problem there = p.problem;
      there.set_gpu(gpu);
      // Sources changed since: the same knobs may appear under several ids.
      absl::StatusOr<ExemplarSet> ex =
          history_.Exemplars(there, options_.figure, 4 * options_.transfer_per_problem);
      if (!ex.ok()) return ex.status();
      std::vector<Exemplar> fastest = ex->fastest;
      if (options_.figure != "device") {
        // Rows from before the job's figure existed rank by device time.
        absl::StatusOr<ExemplarSet> dev =
            history_.Exemplars(there, "device", 4 * options_.transfer_per_problem);
        if (!dev.ok()) return dev.status();
        fastest.insert(fastest.end(), dev->fastest.begin(), dev->fastest.end());
      }
      int taken = 0;
      for (const Exemplar& e : fastest) {
        if (taken == options_.transfer_per_problem) break;
        const SeedFamily* f = FamilyOf(e.candidate);
        if (f == nullptr || !f->searchable) continue;
        KnobParams params(e.candidate.params().begin(), e.candidate.params().end());
        if (!CheckConfig(*f, p.spec.layout, params).ok()) continue;
        std::vector<ProblemState*>& to = plan[Intern(*f, p.spec.layout, params)];
        if (std::find(to.begin(), to.end(), &p) != to.end()) continue;
        to.push_back(&p);
        ++taken;
      }
      found += taken;
    }
    progress_(absl::StrFormat("[%s] %d configurations from %s for %d problems%s", stage_, found,
                              gpu, problems_.size(),
                              found == 0 ? " (none of them measured there, or none legal today)" : ""));
    return plan;
  }

  // Successive halving: each problem's leaders go to the other problems of
  // their layout where the refined model puts them within 1.5x of that
  // problem's best so far.
  std::map<Config*, std::vector<ProblemState*>> WidenPlan() {
    std::map<Config*, std::vector<ProblemState*>> plan;
    for (ProblemState& from : problems_) {
      for (Config* c : Leaders(from, options_.widen_per_problem)) {
        if (IsSpecialised(*c->family, c->params)) continue;  // runs `from` only
        for (ProblemState& to : problems_) {
          if (&to == &from || to.spec.layout != c->candidate.layout() ||
              to.measured.count(c->candidate.id())) {
            continue;
          }
          absl::StatusOr<Estimate> e = model_.Refined(*c->family, c->candidate.layout(), c->params,
                                                      to.spec.shape);
          if (e.ok() && e->partial_bytes <= options_.max_workspace_bytes &&
              (to.best_id.empty() || e->us < 1.5 * to.best_us)) {
            plan[c].push_back(&to);
          }
        }
      }
    }
    return plan;
  }

  // Each problem's fastest general configurations, specialised to it: built
  // with the problem's M, N, K as constants (families with shape knobs only).
  // One per tile, its fastest general configuration, within leader_margin of
  // the problem's best; a tile whose fastest was specialised in an earlier
  // run counts as done, so a rerun takes the next tiles (on the H100 the two
  // fastest were often one tile's two variants, and a slightly slower tile of
  // another family, whose specialisation was worth 12%, went untried).
  std::map<Config*, std::vector<ProblemState*>> SpecialisePlan() {
    std::map<Config*, std::vector<ProblemState*>> plan;
    const size_t n = static_cast<size_t>(std::max(0, options_.specialise_per_problem));
    for (ProblemState& p : problems_) {
      const std::vector<std::pair<double, Config*>> passed = Passed(p);
      std::set<std::string> tiles;
      size_t taken = 0;
      for (const auto& [us, c] : passed) {
        if (taken >= n || us > passed[0].first * options_.leader_margin) break;
        if (IsSpecialised(*c->family, c->params)) continue;
        const std::optional<KnobParams> s = Specialise(*c->family, c->params, p.spec.shape);
        if (!s || !CheckConfig(*c->family, p.spec.layout, *s).ok()) continue;
        Config* special = Intern(*c->family, p.spec.layout, *s);
        if (!tiles.insert(TileOf(*c)).second) continue;
        if (special->failed || p.measured.count(special->candidate.id())) continue;
        plan[special].push_back(&p);
        ++taken;
      }
    }
    return plan;
  }

  // One generation: the best neighbours by the refined model of each
  // problem's leader (evolve_per_problem of them) and of its runners-up of
  // other tiles within leader_margin (half as many each, one per kind of work).
  std::map<Config*, std::vector<ProblemState*>> EvolvePlan() {
    std::map<Config*, std::vector<ProblemState*>> plan;
    for (ProblemState& p : problems_) {
      const std::vector<std::pair<double, Config*>> passed = Passed(p);
      std::vector<Config*> lead;
      std::set<std::string> tiles;
      for (const auto& [us, c] : passed) {
        if (lead.size() > static_cast<size_t>(std::max(0, options_.evolve_runners_up)) ||
            us > passed[0].first * options_.leader_margin) {
          break;
        }
        if (tiles.insert(TileOf(*c)).second) lead.push_back(c);
      }
      std::set<Config*> planned;  // two leaders' neighbourhoods may overlap
      for (size_t i = 0; i < lead.size(); ++i) {
        std::vector<std::pair<const SeedFamily*, KnobParams>> around;
        for (KnobParams& n : Neighbours(*lead[i]->family, p.spec.layout, lead[i]->params)) {
          around.emplace_back(lead[i]->family, std::move(n));
        }
        const size_t keep = i == 0 ? options_.evolve_per_problem : std::max(1, options_.evolve_per_problem / 2);
        size_t taken = 0;
        // A runner-up's moves are of different kinds of work (the refined model
        // ranks a knob's near-duplicates together: on the H100 it put eight
        // split-K variants first, again after two of them had measured slow).
        for (const auto& [us, c] : Rank(p, around, keep + planned.size(), /*diverse=*/i > 0)) {
          if (taken == keep) break;
          if (!planned.insert(c).second) continue;
          plan[c].push_back(&p);
          ++taken;
        }
      }
    }
    return plan;
  }

  // Re-measures each problem's best on fresh inputs in a new runner and
  // promotes it if it passes; a best that fails falls back to the next. The
  // winner reported is then the fastest verified (FastestVerified), and its
  // figures are this job's: a winner verified by an earlier job is measured
  // once more here, since the speedup pairs a kernel with the baselines of
  // its own process and those move between runs (cuBLASLt's tuning on 1000^3
  // kept 8.0 us in one run and 6.9 in the next). Choosing on one measurement
  // and reporting another also keeps the choice's luck out of the figure.
  absl::Status VerifyWinners() {
    std::vector<bool> done(problems_.size(), false);
    for (ProblemState& p : problems_) {
      // A best that has failed on the problem since it was selected (a flaky
      // kernel, caught by another re-check) gives way before anything is verified.
      if (!p.best_id.empty() && Failed(History(p)).count(p.best_id)) FallBack(p);
    }
    // Each attempt re-checks every unsettled problem's best in one round (one
    // build round: on a fresh node the builds took 20-30 s each one at a time).
    for (int attempt = 0; attempt < 4; ++attempt) {
      std::vector<Proposal> rechecks;
      std::vector<std::pair<size_t, bool>> whose;  // (problem, confirming a verified best)
      for (size_t i = 0; i < problems_.size(); ++i) {
        ProblemState& p = problems_[i];
        if (done[i] || p.best_id.empty()) continue;
        const bool confirm = p.best_verified;  // else the search's best, unverified
        if (confirm) FastestVerified(p);
        Config* c = ConfigOf(p.best_id);
        if ((confirm && p.verified_here) || c == nullptr) {  // settled, or not of today's families
          done[i] = true;
          continue;
        }
        // Process-to-process variation is part of a winner's figure: the
        // best is re-checked options_.verify_runs times, each its own proposal
        // and so its own runner process.
        for (int run = 0; run < std::max(1, options_.verify_runs); ++run) {
          Proposal r;
          r.candidate = c->candidate;
          r.problems = {static_cast<int>(i)};
          r.recheck = true;
          r.stage = "verify";
          rechecks.push_back(std::move(r));
          whose.emplace_back(i, confirm);
        }
      }
      if (rechecks.empty()) break;
      std::vector<double> before;
      for (const auto& [i, confirm] : whose) {
        before.push_back(confirm ? problems_[i].VerifiedSpeedup() : problems_[i].Speedup());
      }
      std::map<size_t, std::vector<Observation>> runs;  // per problem, its re-checks
      absl::Status st = channel_.Exchange(std::move(rechecks), [&](size_t k, const Observation& o) {
        runs[whose[k].first].push_back(o);
      });
      if (!st.ok()) return st;
      for (size_t k = 0; k < whose.size(); ++k) {
        const auto [i, confirm] = whose[k];
        auto it = runs.find(i);
        if (it == runs.end()) continue;  // settled by an earlier k
        done[i] = Settle(problems_[i], it->second, confirm, before[k]);
        runs.erase(it);
      }
    }
    return absl::OkStatus();
  }

  // Takes a best's re-checks (one per runner process): when every one passes,
  // each is marked verified (by the coordinator's store callback) and the run
  // of the median speedup is reported; a failure falls back to the next best.
  // Whether the problem is settled.
  bool Settle(ProblemState& p, const std::vector<Observation>& runs, bool confirm, double before) {
    const std::string name = runs.front().proposal.candidate.name();
    std::vector<v1::Measurement> passed;
    for (const Observation& o : runs) {
      if (o.outcome == Outcome::kSkipped) {
        progress_(absl::StrCat("[verify] ", p.name, " ", name, " not re-checked: ", o.reason));
        return true;
      }
      if (o.outcome != Outcome::kMeasured || o.measurements.empty() ||
          o.measurements[0].verdict() != v1::VERDICT_PASSED ||
          FigureUs(o.measurements[0].timings(), options_.figure) <= 0) {
        progress_(absl::StrCat("[verify] ", p.name, " ", name, " failed its re-check: ",
                               o.measurements.empty() ? "no result" : o.measurements[0].reason()));
        FallBack(p);  // the failed re-check is in the store now
        return false;
      }
      passed.push_back(o.measurements[0]);
    }
    std::sort(passed.begin(), passed.end(), [&](const v1::Measurement& a, const v1::Measurement& b) {
      return SpeedupOverBestBaseline(a, options_.figure) < SpeedupOverBestBaseline(b, options_.figure);
    });
    Verified(p, passed[passed.size() / 2], /*here=*/true);
    progress_(absl::StrFormat("[verify] %-22s %s %s: %.3fx re-measured, median of %d runs "
                              "[%.3f-%.3f] (%.3fx %s)",
                              p.name, name, confirm ? "confirmed in this job" : "verified",
                              p.VerifiedSpeedup(), static_cast<int>(passed.size()),
                              SpeedupOverBestBaseline(passed.front(), options_.figure),
                              SpeedupOverBestBaseline(passed.back(), options_.figure), before,
                              confirm ? "in the job that verified it" : "when selected"));
    return confirm;  // an earlier winner may still be the fastest verified
  }

  // The configuration of today's families with candidate id `id`, or null (no
  // such family, or the family's source has changed since).
  Config* ConfigOf(const std::string& id) {
    auto it = configs_.find(id);
    if (it != configs_.end()) return &it->second;
    absl::StatusOr<v1::Candidate> c = history_.GetCandidate(id);
    const SeedFamily* f = c.ok() ? FamilyOf(*c) : nullptr;
    if (f == nullptr) return nullptr;
    Config* made = Intern(*f, c->layout(), KnobParams(c->params().begin(), c->params().end()));
    return made->candidate.id() == id ? made : nullptr;
  }

  // The candidates with a failed measurement among `history`.
  static std::set<std::string> Failed(const std::vector<StoredMeasurement>& history) {
    std::set<std::string> out;
    for (const StoredMeasurement& m : history) {
      if (m.measurement.verdict() != v1::VERDICT_PASSED) out.insert(m.measurement.candidate_id());
    }
    return out;
  }

  // Makes the problem's best the fastest correct candidate of today's sources
  // that has never failed on it (verified if it was, in an earlier run).
  void FallBack(ProblemState& p) {
    p.best_id.clear();
    p.best_us = std::numeric_limits<double>::infinity();
    p.best_verified = false;
    const std::vector<StoredMeasurement> history = History(p);
    const std::set<std::string> failed = Failed(history);
    for (const StoredMeasurement& m : history) {
      const v1::Measurement& x = m.measurement;
      const double us = FigureUs(x.timings(), options_.figure);
      if (x.verdict() == v1::VERDICT_PASSED && !failed.count(x.candidate_id()) && us > 0 &&
          us < p.best_us && CurrentId(x.candidate_id())) {
        p.best_us = FigureUs(x.timings(), options_.figure);
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

  const std::vector<SeedFamily>& seeds_;
  std::string job_id_;
  RoundChannel& channel_;
  HistoryReader& history_;
  SearchOptions options_;
  ProgressFn progress_;
  CostModel model_;
  Clock::time_point start_;
  double stage_deadline_;   // seconds: stages 0-2 stop here, evolve at the budget
  bool stages_cut_ = false;
  std::string stage_;
  std::vector<ProblemState> problems_;
  std::map<std::string, Config> configs_;  // by candidate id; stable addresses
  std::map<std::string, bool> current_;    // candidate id -> Current()
  std::map<v1::Layout, std::vector<std::pair<const SeedFamily*, KnobParams>>> spaces_;
  SearchResult result_;
  int resumed_ = 0;
  int improved_ = 0;  // problems whose best improved by 0.5% in this stage
};

}  // namespace

absl::StatusOr<SearchResult> RunStages(const std::vector<SeedFamily>& seeds,
                                       const std::vector<ShapeSpec>& problems,
                                       const std::string& job_id, RoundChannel& channel,
                                       const SearchOptions& options, const ProgressFn& progress) {
  if (problems.empty()) return absl::InvalidArgumentError("no problems to search");
  if (!IsFigure(options.figure)) {
    return absl::InvalidArgumentError("the search's figure must be device, warm, cold or call");
  }
  if (seeds.empty()) return absl::FailedPreconditionError("no seed families loaded");
  return Search(seeds, problems, job_id, channel, options, progress).Run();
}

}  // namespace anvil
