// Turns measurements into rewards for the search: a correct candidate earns
// log2 of its speedup over the fastest baseline by the chosen figure (0 at
// parity, +1 at twice as fast); a failure earns a fixed negative reward by
// kind, worst for cheating. Pure functions; thread-safe.
#ifndef ANVIL_REWARD_REWARD_H_
#define ANVIL_REWARD_REWARD_H_

#include <string>

#include "absl/status/statusor.h"
#include "anvil/v1/types.pb.h"
#include "proto/figures.h"

namespace anvil {

struct RewardValue {
  double value = 0;
  std::string kind;     // "speedup" or the failure's verdict, e.g. "compile_error"
  double speedup = 0;   // best baseline / candidate, when correct
};

// figure: one of proto/figures.h (IsFigure). A passed measurement without
// that figure (a call that cannot be captured in a graph, ranked by a graph
// figure) earns the penalty of a candidate that declined the problem (kind
// "no_figure"); one whose baselines lack it earns 0 (kind "no_baseline").
absl::StatusOr<RewardValue> ComputeReward(const v1::Measurement& m, const std::string& figure);
// The same for a candidate that never reached the runner.
RewardValue BuildFailureReward(const v1::Build& build);

}  // namespace anvil

#endif  // ANVIL_REWARD_REWARD_H_
