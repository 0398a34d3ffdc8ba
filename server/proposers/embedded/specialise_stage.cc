// The specialise stage (the first of stage 3, which has the budget's evolve
// share): each problem's fastest general configurations, rebuilt for it
// alone with the problem's M, N, K as constants (families with shape knobs
// only). One per tile, its fastest general configuration, within
// leader_margin of the problem's best, specialise_per_problem of them; a tile
// whose fastest was specialised in an earlier run counts as done, so a rerun
// takes the next tiles (on the H100 the two fastest were often one tile's two
// variants, and a slightly slower tile of another family, whose
// specialisation was worth 12%, went untried).
#include <set>
#include <string>

#include "seeds/space.h"
#include "server/proposers/embedded/config_round.h"
#include "server/proposers/embedded/ranking.h"
#include "server/proposers/embedded/stages.h"

namespace anvil {
namespace {

class SpecialiseStage : public OneRoundStage {
 public:
  SpecialiseStage() : OneRoundStage("specialise") {}

 protected:
  absl::StatusOr<ConfigPlan> MakePlan(SearchState& s) override {
    s.OpenEvolveShare();
    ConfigPlan plan;
    const size_t n = static_cast<size_t>(std::max(0, s.options().specialise_per_problem));
    for (ProblemState& p : s.problems()) {
      const Ranked passed = Passed(s, p);
      std::set<std::string> tiles;
      size_t taken = 0;
      for (const auto& [us, c] : passed) {
        if (taken >= n || us > passed[0].first * s.options().leader_margin) break;
        if (IsSpecialised(*c->family, c->params)) continue;
        const std::optional<KnobParams> special = Specialise(*c->family, c->params, p.spec.shape);
        if (!special || !CheckConfig(*c->family, p.spec.layout, *special).ok()) continue;
        Config* made = s.Intern(*c->family, p.spec.layout, *special);
        if (!tiles.insert(TileOf(*c)).second) continue;
        if (made->failed || p.measured.count(made->candidate.id())) continue;
        plan[made].push_back(&p);
        ++taken;
      }
    }
    return plan;
  }
};

}  // namespace

std::unique_ptr<Stage> MakeSpecialiseStage() { return std::make_unique<SpecialiseStage>(); }

}  // namespace anvil
