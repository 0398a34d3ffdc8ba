#include "tools/soak/plan.h"

#include <algorithm>
#include <cmath>

namespace anvil {

JobMix SplitJobs(int jobs, double eval_share, double hostile_share) {
  JobMix mix;
  mix.hostile = std::min(static_cast<int>(std::lround(jobs * hostile_share)), jobs / 2);
  mix.evals = std::max(static_cast<int>(std::lround(jobs * eval_share)), mix.hostile);
  mix.evals = std::min(mix.evals, jobs - mix.hostile);
  mix.builds = jobs - mix.evals - mix.hostile;
  return mix;
}

bool IsRecoveryFixture(const Expectation& e) {
  return !e.policy_rejects && (e.verdict == "TIMEOUT" || e.verdict == "CRASHED");
}

std::vector<int> HostileRound(const std::vector<Fixture>& fixtures, int recovery_weight) {
  std::vector<int> recovery, others;
  for (int i = 0; i < static_cast<int>(fixtures.size()); ++i) {
    (IsRecoveryFixture(fixtures[i].expect) ? recovery : others).push_back(i);
  }
  const size_t slots = recovery.size() * static_cast<size_t>(std::max(recovery_weight, 1));
  std::vector<int> round;
  size_t next_other = 0;
  for (size_t s = 0; s < slots; ++s) {
    round.push_back(recovery[s % recovery.size()]);
    const size_t until = (s + 1) * others.size() / slots;
    while (next_other < until) round.push_back(others[next_other++]);
  }
  while (next_other < others.size()) round.push_back(others[next_other++]);
  return round;
}

std::vector<GpuJob> PlanGpuLane(int evals, int hostile, const std::vector<int>& round) {
  const int total = evals + hostile;
  std::vector<GpuJob> lane;
  lane.reserve(total);
  int next_hostile = 0, next_eval = 0;
  for (int pos = 0; pos < total; ++pos) {
    // Hostile job j sits at floor(j * total / hostile): at least two apart
    // because total >= 2 * hostile, and never last.
    const bool hostile_here =
        next_hostile < hostile &&
        pos == static_cast<int>(static_cast<int64_t>(next_hostile) * total / hostile);
    if (hostile_here) {
      lane.push_back({true, round[next_hostile++ % round.size()]});
    } else {
      lane.push_back({false, next_eval++});
    }
  }
  return lane;
}

}  // namespace anvil
