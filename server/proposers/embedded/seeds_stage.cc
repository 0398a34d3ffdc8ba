// The seeds stage: every family's default and suggested configurations on
// every problem of their layouts whose split-K workspace fits the runner's
// cap, except where the same knobs were measured under an earlier source of
// the family (the model has those observations, and the carry stage
// re-measured each problem's fastest); a seeds-only run measures them all.
#include "absl/strings/str_format.h"
#include "seeds/space.h"
#include "server/proposers/embedded/config_round.h"
#include "server/proposers/embedded/stages.h"

namespace anvil {
namespace {

class SeedsStage : public OneRoundStage {
 public:
  SeedsStage() : OneRoundStage("seeds") {}

 protected:
  absl::StatusOr<ConfigPlan> MakePlan(SearchState& s) override {
    ConfigPlan plan;
    int known = 0;
    for (Config* c : s.SeedConfigs()) {
      for (ProblemState& p : s.problems()) {
        if (p.spec.layout != c->candidate.layout() || !s.WorkspaceFits(*c, p)) continue;
        if (!s.options().seeds_only && !p.measured.count(c->candidate.id()) &&
            p.measured_knobs.count(ConfigKey(*c->family, c->candidate.layout(), c->params))) {
          ++known;
          continue;
        }
        plan[c].push_back(&p);
      }
    }
    if (known > 0) {
      s.Progress(absl::StrFormat("[seeds] %d (configuration, problem) pairs skipped: measured "
                                 "under an earlier source",
                                 known));
    }
    return plan;
  }
};

}  // namespace

std::unique_ptr<Stage> MakeSeedsStage() { return std::make_unique<SeedsStage>(); }

}  // namespace anvil
