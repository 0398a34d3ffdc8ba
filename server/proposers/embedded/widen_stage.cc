// The widen stage, successive halving over problems: each problem's leaders
// (widen_per_problem of what it measured) go to the other problems of their
// layout where the refined model puts them within 1.5x of that problem's
// best so far.
#include "seeds/space.h"
#include "server/proposers/embedded/config_round.h"
#include "server/proposers/embedded/ranking.h"
#include "server/proposers/embedded/stages.h"

namespace anvil {
namespace {

// Whether the model gives `c` a chance on `to`: its workspace fits and it
// is predicted within 1.5x of the problem's best (any, before it has one).
bool Promising(SearchState& s, const Config& c, const ProblemState& to) {
  absl::StatusOr<Estimate> e = s.model().Refined(*c.family, c.candidate.layout(), c.params, to.spec.shape);
  return e.ok() && e->partial_bytes <= s.options().max_workspace_bytes &&
         (to.best_id.empty() || e->us < 1.5 * to.best_us);
}

class WidenStage : public OneRoundStage {
 public:
  WidenStage() : OneRoundStage("widen") {}

 protected:
  absl::StatusOr<ConfigPlan> MakePlan(SearchState& s) override {
    ConfigPlan plan;
    for (ProblemState& from : s.problems()) {
      for (Config* c : Leaders(s, from, s.options().widen_per_problem)) {
        if (IsSpecialised(*c->family, c->params)) continue;  // runs `from` only
        for (ProblemState& to : s.problems()) {
          if (&to == &from || to.spec.layout != c->candidate.layout() ||
              to.measured.count(c->candidate.id())) {
            continue;
          }
          if (Promising(s, *c, to)) plan[c].push_back(&to);
        }
      }
    }
    return plan;
  }
};

}  // namespace

std::unique_ptr<Stage> MakeWidenStage() { return std::make_unique<WidenStage>(); }

}  // namespace anvil
