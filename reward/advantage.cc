#include "reward/advantage.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace anvil {

double ClippedReward(const RewardValue& r, const RewardClip& clip) {
  if (r.kind != "speedup") return r.value;
  return std::clamp(r.value, -clip.clip, clip.clip);
}

double SampleReward(const std::vector<double>& rewards) {
  return std::accumulate(rewards.begin(), rewards.end(), 0.0) / double(rewards.size());
}

std::vector<double> GroupAdvantages(const std::vector<double>& rewards, double eps) {
  std::vector<double> out(rewards.size(), 0.0);
  if (rewards.size() < 2) return out;
  const double mean = std::accumulate(rewards.begin(), rewards.end(), 0.0) / double(rewards.size());
  double var = 0;
  for (double r : rewards) var += (r - mean) * (r - mean);
  const double sd = std::sqrt(var / double(rewards.size()));
  if (sd < eps) return out;
  for (size_t i = 0; i < rewards.size(); ++i) out[i] = (rewards[i] - mean) / (sd + eps);
  return out;
}

}  // namespace anvil
