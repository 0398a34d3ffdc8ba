// The seeds stage: every family's default and suggested configurations on
// every problem of their layouts whose split-K workspace fits the runner's
// cap, except where the same knobs were measured under an earlier source of
// the family (the model has those observations, and the carry stage
// re-measured each problem's fastest); a seeds-only run measures them all.
// A budget too short for all of them on every problem (SearchOptions::
// seeds_share) measures each problem's most promising by the cost model.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"
#include "seeds/space.h"
#include "server/proposers/embedded/config_round.h"
#include "server/proposers/embedded/ranking.h"
#include "server/proposers/embedded/stages.h"

namespace anvil {
namespace {

// Seed configurations per problem the budget allows (0: no limit).
size_t SeedsPerProblem(const SearchOptions& o, size_t problems) {
  if (o.seeds_only || problems == 0 || o.seeds_share <= 0) return 0;
  const double rate =
      o.fidelity == v1::FIDELITY_SCREEN ? o.screens_per_minute : o.full_measurements_per_minute;
  const double measurable = o.seeds_share * o.budget_seconds / 60 * rate;
  return static_cast<size_t>(
      std::max<double>(o.min_seeds_per_problem, std::floor(measurable / double(problems))));
}

class SeedsStage : public OneRoundStage {
 public:
  SeedsStage() : OneRoundStage("seeds") {}

 protected:
  absl::StatusOr<ConfigPlan> MakePlan(SearchState& s) override {
    const std::vector<Config*> seeds = s.SeedConfigs();
    const size_t cap = SeedsPerProblem(s.options(), s.problems().size());
    ConfigPlan plan;
    int known = 0, capped = 0;
    for (ProblemState& p : s.problems()) {
      std::vector<Config*> mine;
      for (Config* c : seeds) {
        if (p.spec.layout != c->candidate.layout() || !s.WorkspaceFits(*c, p)) continue;
        if (!s.options().seeds_only && !p.measured.count(c->candidate.id()) &&
            p.measured_knobs.count(ConfigKey(*c->family, c->candidate.layout(), c->params))) {
          ++known;
          continue;
        }
        mine.push_back(c);
      }
      if (cap > 0 && mine.size() > cap) {
        capped += static_cast<int>(mine.size() - cap);
        mine = MostPromising(s, p, mine, cap);
      }
      for (Config* c : mine) plan[c].push_back(&p);
    }
    if (known > 0) {
      s.Progress(absl::StrFormat("[seeds] %d (configuration, problem) pairs skipped: measured "
                                 "under an earlier source",
                                 known));
    }
    if (capped > 0) {
      s.Progress(absl::StrFormat("[seeds] %d per problem at most in this budget (%d pairs left to "
                                 "the later stages' ranking)",
                                 cap, capped));
    }
    return plan;
  }

 private:
  // The `n` of `configs` the cost model ranks fastest on the problem; the
  // rest of them in their order where the model cannot rank enough.
  static std::vector<Config*> MostPromising(SearchState& s, const ProblemState& p,
                                            const std::vector<Config*>& configs, size_t n) {
    std::vector<std::pair<const SeedFamily*, KnobParams>> space;
    for (Config* c : configs) space.emplace_back(c->family, c->params);
    std::vector<Config*> out;
    for (const auto& [us, c] : Rank(s, p, space, n, /*diverse=*/false)) out.push_back(c);
    for (Config* c : configs) {
      if (out.size() >= n) break;
      if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
    }
    return out;
  }
};

}  // namespace

std::unique_ptr<Stage> MakeSeedsStage() { return std::make_unique<SeedsStage>(); }

}  // namespace anvil
