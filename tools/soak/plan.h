// The order of a soak's jobs. Builds do not need the GPU: they run on their
// own threads, as many at once as asked. The GPU lane is one sequence of
// evaluations, passing and hostile, and every hostile job is followed by a
// passing one, so the recovery after a hang or a crash is measured on the very
// next runner. Pure functions; thread-safe.
#ifndef ANVIL_TOOLS_SOAK_PLAN_H_
#define ANVIL_TOOLS_SOAK_PLAN_H_

#include <vector>

#include "tools/soak/fixtures.h"

namespace anvil {

struct JobMix {
  int builds = 0;
  int evals = 0;    // passing candidates
  int hostile = 0;  // tests/adversarial and tests/broken files
};

// Splits `jobs` by the shares (rounded). Hostile jobs never outnumber
// passing evaluations: each needs one after it.
JobMix SplitJobs(int jobs, double eval_share, double hostile_share);

// A hang or a crash: the runner is killed or dies, and a fresh one follows.
bool IsRecoveryFixture(const Expectation& e);

// One round of hostile jobs, as indices into `fixtures`: each recovery
// fixture `recovery_weight` times (at least once), spread evenly among the
// others, a recovery fixture first so that short soaks include one.
std::vector<int> HostileRound(const std::vector<Fixture>& fixtures, int recovery_weight);

struct GpuJob {
  bool hostile = false;
  int index = 0;  // hostile: index into the fixtures; passing: the n-th passing evaluation
};

// `evals` passing and `hostile` hostile jobs (taken from `round` over and
// over), hostile ones evenly spread and each followed by a passing one.
// REQUIRES: hostile <= evals; round non-empty when hostile > 0.
std::vector<GpuJob> PlanGpuLane(int evals, int hostile, const std::vector<int>& round);

}  // namespace anvil

#endif  // ANVIL_TOOLS_SOAK_PLAN_H_
