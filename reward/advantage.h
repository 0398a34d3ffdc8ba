// Execution-grounded rewards for the LLM proposer, as CUDA-L1 and CUDA-L2
// use them: a sample's reward is its clipped log2 speedup over the best
// baseline by the job's figure (failures keep their fixed negative reward by
// kind, cheating worst), and its advantage is GRPO's group-normalised reward
// among the samples of the same prompt. Pure functions; thread-safe.
#ifndef ANVIL_REWARD_ADVANTAGE_H_
#define ANVIL_REWARD_ADVANTAGE_H_

#include <vector>

#include "reward/reward.h"

namespace anvil {

// Speedup rewards clipped to [-clip, clip] (log2: clip 3 is 8x either way),
// so one freak timing cannot dominate a group; failure rewards unchanged.
struct RewardClip {
  double clip = 3.0;
};
double ClippedReward(const RewardValue& r, const RewardClip& clip = {});

// A sample's reward from its rewards on the problems it was measured on:
// their mean (a kernel is judged on everything it was sent to). A sample
// that never reached a problem (no code, refused, compile error) has one
// failure reward. REQUIRES: !rewards.empty().
double SampleReward(const std::vector<double>& rewards);

// GRPO advantages: (r_i - mean) / (std + eps) over one group (the samples of
// one prompt); all zeros for a group of one or of equal rewards.
std::vector<double> GroupAdvantages(const std::vector<double>& rewards, double eps = 1e-6);

}  // namespace anvil

#endif  // ANVIL_REWARD_ADVANTAGE_H_
