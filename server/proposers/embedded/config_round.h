// ConfigRound: a stage's plan (configurations and the problems to measure
// each on) as one round of proposals: compile once, measure many. And
// OneRoundStage, a stage that is one such round. Thread-compatible.
#ifndef ANVIL_SERVER_PROPOSERS_EMBEDDED_CONFIG_ROUND_H_
#define ANVIL_SERVER_PROPOSERS_EMBEDDED_CONFIG_ROUND_H_

#include <string>
#include <vector>

#include "server/proposers/embedded/search_state.h"
#include "server/proposers/embedded/stage.h"

namespace anvil {

// Adds to `plan`, for `p`, the configuration of `c`'s knobs built from its
// family's current source, specialised ones rebuilt for p's shape. False
// (nothing added) when the family is gone or not searchable, the knobs are
// not legal today, or p already has it in the plan.
bool PlanToday(SearchState& s, const v1::Candidate& c, ProblemState& p, ConfigPlan& plan);

class ConfigRound {
 public:
  // Proposes each configuration of `plan` for its problems that have not
  // seen it, each problem once. The configurations with the most problems go
  // first (then by id); the coordinator builds them in rounds and, with
  // `within_budget`, measures them until the stage's deadline
  // (Proposal::measure_by), so a budget that ends mid-stage leaves at most two
  // rounds built and not measured. A configuration whose build failed in an
  // earlier run is marked failed instead of proposed. Nothing is proposed
  // when nothing is new or (within_budget) the stage's budget is spent; when
  // nothing is proposed, the round is over at once (Finish is done).
  std::vector<Proposal> Start(SearchState& s, const ConfigPlan& plan, bool within_budget);
  // The answer to proposals[i]: a failed build marks the configuration
  // failed, each measurement goes into its problem's state and the model.
  void Take(SearchState& s, size_t i, const Observation& o);
  // After the last answer: the time the round took, the budget's verdict
  // (said when the stage or the budget was cut) and a status line.
  void Finish(SearchState& s);

 private:
  std::vector<Proposal> Propose(SearchState& s, const std::vector<Config*>& todo, const ConfigPlan& plan);

  std::vector<Config*> configs_;  // [i]: proposals[i]'s
  bool within_budget_ = true;
  bool measuring_ = false;        // proposals are out
  SearchState::Clock::time_point sent_;
};

// A stage of one round: the plan MakePlan returns, as a ConfigRound.
class OneRoundStage : public Stage {
 public:
  explicit OneRoundStage(std::string name) : name_(std::move(name)) {}
  absl::StatusOr<std::vector<Proposal>> Plan(SearchState& s) final;
  void Take(SearchState& s, size_t i, const Observation& answer) final;
  absl::Status EndRound(SearchState& s) final;

 protected:
  // The stage's plan (the state's stage is this stage's name by then).
  virtual absl::StatusOr<ConfigPlan> MakePlan(SearchState& s) = 0;

 private:
  std::string name_;
  bool planned_ = false;
  ConfigRound round_;
};

}  // namespace anvil

#endif  // ANVIL_SERVER_PROPOSERS_EMBEDDED_CONFIG_ROUND_H_
