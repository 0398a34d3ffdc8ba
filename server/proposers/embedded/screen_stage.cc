// The screen stage: for each problem, the legal configurations (seed.json
// rules), pruned by tile-versus-shape waste and ordered by the cost model
// (roofline + wave quantisation, refined by nearest measured neighbours);
// the best screen_per_problem, one per kind of work, are measured there.
#include "server/proposers/embedded/config_round.h"
#include "server/proposers/embedded/ranking.h"
#include "server/proposers/embedded/stages.h"

namespace anvil {
namespace {

class ScreenStage : public OneRoundStage {
 public:
  ScreenStage() : OneRoundStage("screen") {}

 protected:
  absl::StatusOr<ConfigPlan> MakePlan(SearchState& s) override {
    ConfigPlan plan;
    for (ProblemState& p : s.problems()) {
      const size_t keep = s.options().screen_per_problem;
      for (const auto& [us, c] : Rank(s, p, s.Space(p.spec.layout), keep, /*diverse=*/true)) {
        plan[c].push_back(&p);
      }
    }
    return plan;
  }
};

}  // namespace

std::unique_ptr<Stage> MakeScreenStage() { return std::make_unique<ScreenStage>(); }

}  // namespace anvil
