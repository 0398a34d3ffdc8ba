// The evolve stage: generations of one- and two-knob moves around each
// problem's leader and its runners-up of other tiles within leader_margin,
// ordered by the refined model, each generation taking the best not yet
// measured, until evolve_patience generations in a row improve no
// problem's best by 0.5%, the moves run out, or the budget is spent. A
// generation that improves nothing does not end the stage at once: the next
// takes the leaders' next-ranked neighbours (on the H100 a search that
// stopped at the first such generation left a third of its budget unused).
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "seeds/space.h"
#include "server/proposers/embedded/config_round.h"
#include "server/proposers/embedded/ranking.h"
#include "server/proposers/embedded/stages.h"

namespace anvil {
namespace {

// The problem's leader and its runners-up of other tiles within leader_margin.
std::vector<Config*> Leads(SearchState& s, const ProblemState& p) {
  const Ranked passed = Passed(s, p);
  std::vector<Config*> lead;
  std::set<std::string> tiles;
  for (const auto& [us, c] : passed) {
    if (lead.size() > static_cast<size_t>(std::max(0, s.options().evolve_runners_up)) ||
        us > passed[0].first * s.options().leader_margin) {
      break;
    }
    if (tiles.insert(TileOf(*c)).second) lead.push_back(c);
  }
  return lead;
}

// One generation: the best neighbours by the refined model of each
// problem's leader (evolve_per_problem of them) and of its runners-up (half
// as many each, one per kind of work).
ConfigPlan Generation(SearchState& s) {
  ConfigPlan plan;
  const int per_problem = s.options().evolve_per_problem;
  for (ProblemState& p : s.problems()) {
    const std::vector<Config*> lead = Leads(s, p);
    std::set<Config*> planned;  // two leaders' neighbourhoods may overlap
    for (size_t i = 0; i < lead.size(); ++i) {
      std::vector<std::pair<const SeedFamily*, KnobParams>> around;
      for (KnobParams& n : Neighbours(*lead[i]->family, p.spec.layout, lead[i]->params)) {
        around.emplace_back(lead[i]->family, std::move(n));
      }
      const size_t keep = i == 0 ? per_problem : std::max(1, per_problem / 2);
      size_t taken = 0;
      // A runner-up's moves are of different kinds of work (the refined model
      // ranks a knob's near-duplicates together: on the H100 it put eight
      // split-K variants first, again after two of them had measured slow).
      for (const auto& [us, c] : Rank(s, p, around, keep + planned.size(), /*diverse=*/i > 0)) {
        if (taken == keep) break;
        if (!planned.insert(c).second) continue;
        plan[c].push_back(&p);
        ++taken;
      }
    }
  }
  return plan;
}

class EvolveStage : public Stage {
 public:
  absl::StatusOr<std::vector<Proposal>> Plan(SearchState& s) override {
    while (!ended_ && generation_ < s.options().generations && !s.OverBudget()) {
      ++generation_;
      s.set_stage(absl::StrCat("evolve-", generation_));
      const ConfigPlan plan = Generation(s);
      if (plan.empty()) break;
      s.reset_improved();
      std::vector<Proposal> round = round_.Start(s, plan, /*within_budget=*/true);
      if (!round.empty()) return round;
      EndGeneration(s);
    }
    ended_ = true;
    return std::vector<Proposal>();
  }

  void Take(SearchState& s, size_t i, const Observation& answer) override { round_.Take(s, i, answer); }

  absl::Status EndRound(SearchState& s) override {
    round_.Finish(s);
    EndGeneration(s);
    return absl::OkStatus();
  }

 private:
  // Counts a generation that moved no problem's best by 0.5%; enough of them
  // in a row end the stage (converged).
  void EndGeneration(const SearchState& s) {
    idle_ = s.improved() == 0 ? idle_ + 1 : 0;
    if (idle_ >= std::max(1, s.options().evolve_patience)) ended_ = true;
  }

  int generation_ = 0;
  int idle_ = 0;  // generations in a row that moved no problem's best by 0.5%
  bool ended_ = false;
  ConfigRound round_;
};

}  // namespace

std::unique_ptr<Stage> MakeEvolveStage() { return std::make_unique<EvolveStage>(); }

}  // namespace anvil
