#include "reward/bandit.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace anvil {

Ucb1::Ucb1(std::vector<std::string> arms, double exploration)
    : arms_(std::move(arms)), exploration_(exploration), pulls_(arms_.size()), sum_(arms_.size()) {}

int Ucb1::Choose(const std::vector<bool>& allowed) const {
  int best = -1;
  double best_score = 0;
  for (size_t i = 0; i < arms_.size(); ++i) {
    if (!allowed.empty() && !allowed[i]) continue;
    if (pulls_[i] == 0) return static_cast<int>(i);
    const double score =
        sum_[i] / pulls_[i] + exploration_ * std::sqrt(2 * std::log(double(total_)) / pulls_[i]);
    if (best < 0 || score > best_score) {
      best = static_cast<int>(i);
      best_score = score;
    }
  }
  return best;
}

void Ucb1::Update(int arm, double payoff) {
  ++pulls_[arm];
  ++total_;
  sum_[arm] += std::clamp(payoff, 0.0, 1.0);
}

void Ucb1::Set(int arm, int pulls, double payoff_sum) {
  total_ += pulls - pulls_[arm];
  pulls_[arm] = pulls;
  sum_[arm] = payoff_sum;
}

std::string Ucb1::Describe() const {
  std::vector<std::string> parts;
  for (size_t i = 0; i < arms_.size(); ++i) {
    parts.push_back(absl::StrFormat("%s: %.2f over %d", arms_[i], mean(int(i)), pulls_[i]));
  }
  return absl::StrJoin(parts, ", ");
}

double RewardPayoff(double clipped_reward, bool passed, double full) {
  if (!passed) return 0;
  const double lo = -1, hi = std::log2(full);  // half speed .. `full` times
  return std::clamp(0.1 + 0.9 * (clipped_reward - lo) / (hi - lo), 0.1, 1.0);
}

}  // namespace anvil
