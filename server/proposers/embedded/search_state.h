// SearchState: what the embedded search knows, shared by its stages
// (stage.h): per problem what was measured and its bests, the
// configurations interned so far, the cost model, the budget's clock, the
// run's result, and the coordinator as of its latest call (device, final
// phase, the store's history). Each best is decided by proto/figures.h's
// rule (RankingUs, Beats). Thread-compatible: the proposer's caller's thread.
#ifndef ANVIL_SERVER_PROPOSERS_EMBEDDED_SEARCH_STATE_H_
#define ANVIL_SERVER_PROPOSERS_EMBEDDED_SEARCH_STATE_H_

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "proto/problem.h"
#include "seeds/seeds.h"
#include "server/proposer.h"
#include "server/proposers/embedded/cost_model.h"
#include "server/proposers/embedded/search_options.h"

namespace anvil {

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
  double best_us = 0;              // the fastest measurement's (0: none yet)
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

// A stage's plan: each configuration and the problems to measure it on.
using ConfigPlan = std::map<Config*, std::vector<ProblemState*>>;

class SearchState {
 public:
  using Clock = std::chrono::steady_clock;

  // REQUIRES: `seeds` outlives the state; problems non-empty; options.figure
  // a figure. `elapsed_at_start`: SearchView::elapsed_seconds now (a
  // proposal's measure_by is on the view's clock).
  SearchState(const std::vector<SeedFamily>& seeds, const std::vector<ShapeSpec>& problems,
              std::string job_id, SearchOptions options, ProgressFn progress, double elapsed_at_start);

  // The coordinator as of its latest call: the device once a runner has
  // started, the final phase, the store's history.
  void See(const SearchView& view);
  const std::optional<v1::RunnerInfo>& device() const { return device_; }
  HistoryReader& history() { return *history_; }
  const std::string& job_id() const { return job_id_; }
  double elapsed_at_start() const { return elapsed_at_start_; }

  const SearchOptions& options() const { return options_; }
  const std::vector<SeedFamily>& seeds() const { return seeds_; }
  std::vector<ProblemState>& problems() { return problems_; }
  const CostModel& model() const { return model_; }
  SearchResult& result() { return result_; }
  void Progress(const std::string& line) const { progress_(line); }
  // Where the lines saying a problem's best improved go (default: with the
  // other lines).
  void set_new_best_lines(ProgressFn f) { new_best_lines_ = std::move(f); }
  // The stage under way, as progress lines, proposals and the curve name it.
  const std::string& stage() const { return stage_; }
  void set_stage(std::string stage) { stage_ = std::move(stage); }
  // Problems whose best improved by 0.5% since the last reset (evolve's test).
  int improved() const { return improved_; }
  void reset_improved() { improved_ = 0; }

  // The budget. Seconds since the search started, by options().clock.
  Clock::time_point Now() const;
  double Seconds() const;
  // Whether the current stage must stop: the whole budget is spent, or
  // stages 0-2 have spent theirs (the rest is the evolve stage's); says so once.
  bool OverBudget();
  // Stage 3 begins: from now on stages stop at the whole budget.
  void OpenEvolveShare() { stage_deadline_ = options_.budget_seconds; }
  // Seconds into the search at which the current stage stops.
  double StageDeadline() const { return std::min(options_.budget_seconds, stage_deadline_); }

  // The unique Config for (family, layout, params); stable address.
  Config* Intern(const SeedFamily& f, v1::Layout layout, const KnobParams& params);
  // The configuration of today's families with candidate id `id`, or null (no
  // such family, or the family's source has changed since).
  Config* ConfigOf(const std::string& id);
  const SeedFamily* FamilyOf(const v1::Candidate& c) const;
  // The configurations of a layout built in this run (and not failed since),
  // in candidate id order.
  std::vector<Config*> BuiltConfigs(v1::Layout layout);
  // Every searchable family's default and suggested configurations, for
  // each layout of the problems (in the problems' order).
  std::vector<Config*> SeedConfigs();
  // The legal configurations of every family with a cost model for a layout
  // (late knobs at their defaults), enumerated once.
  const std::vector<std::pair<const SeedFamily*, KnobParams>>& Space(v1::Layout layout);
  // Whether the configuration's split-K partials on the problem stay within
  // the runner's workspace cap, by the family's model (true when it cannot tell).
  bool WorkspaceFits(const Config& c, const ProblemState& p) const;

  // The problems' keys (with the GPU) and the model's sm count, from device().
  // REQUIRES: device() known.
  void SetProblemKeys();
  // Sets the keys, then reads back every measurement of these problems: what
  // was tried, the bests, and the model's observations.
  absl::Status LoadHistory();
  int resumed() const { return resumed_; }
  // Takes one measurement of `c` (null: unknown) into the problem's state and
  // the cost model; `fresh`: measured in this run (progress and curve).
  void Record(ProblemState& p, const v1::Candidate* c, const v1::Measurement& m, bool fresh);
  // Makes the reported winner the fastest verified re-measurement of today's
  // candidates on the problem that has not failed there since.
  void FastestVerified(ProblemState& p);
  // Makes the problem's best the fastest correct candidate of today's sources
  // that has never failed on it (verified if it was, in an earlier run).
  void FallBack(ProblemState& p);
  // Makes the problem's best, unverified, the fastest correct candidate of
  // today's sources that has never failed on it, has no verified measurement,
  // and whose ranking figure beats `verified_us` (a verified winner's); false
  // (nothing changed) when there is none.
  bool NextToVerify(ProblemState& p, double verified_us);
  void Verified(ProblemState& p, const v1::Measurement& m, bool here);
  // The store's measurements of the problem (none when it cannot be read).
  std::vector<StoredMeasurement> History(const ProblemState& p);
  // The candidates with a failed measurement among `history`.
  static std::set<std::string> Failed(const std::vector<StoredMeasurement>& history);

  // One line: the stage, time, build and measure rates, problems ahead, geomean.
  std::string StatusLine() const;
  // The result once the stages have ended: each problem's verified winner.
  SearchResult Finish();

 private:
  bool Current(const v1::Candidate* c);
  bool CurrentId(const std::string& id);
  void Improve(ProblemState& p, const v1::Candidate* c, const v1::Measurement& m, double us, bool fresh);
  void ObserveModel(ProblemState& p, const v1::Candidate* c, const v1::Measurement& m, bool lacks_figure);
  double Geomean() const;

  const std::vector<SeedFamily>& seeds_;
  std::string job_id_;
  SearchOptions options_;
  ProgressFn progress_;
  ProgressFn new_best_lines_;  // empty: progress_
  CostModel model_;
  Clock::time_point start_;
  double elapsed_at_start_;
  double stage_deadline_;   // seconds: stages 0-2 stop here, evolve at the budget
  bool stages_cut_ = false;
  std::string stage_;
  std::vector<ProblemState> problems_;
  std::map<std::string, Config> configs_;  // by candidate id; stable addresses
  // Intern's index by what determines the id (the family's source is fixed
  // for the state's life): a candidate id hashes the whole family source, far
  // too slow to compute for every configuration a ranking looks at.
  std::map<std::tuple<const SeedFamily*, v1::Layout, KnobParams>, Config*> interned_;
  std::map<std::string, bool> current_;    // candidate id -> Current()
  std::map<v1::Layout, std::vector<std::pair<const SeedFamily*, KnobParams>>> spaces_;
  SearchResult result_;
  int resumed_ = 0;
  int improved_ = 0;
  std::optional<v1::RunnerInfo> device_;
  bool final_phase_ = false;
  HistoryReader* history_ = nullptr;
};

}  // namespace anvil

#endif  // ANVIL_SERVER_PROPOSERS_EMBEDDED_SEARCH_STATE_H_
