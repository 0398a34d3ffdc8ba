// Ucb1: a multi-armed bandit (UCB1, Auer et al. 2002) that moves effort
// toward what pays: the job's budget between proposers, the LLM proposer's
// prompts between context recipes. Payoffs are in [0, 1]; an arm never
// pulled is chosen first. Thread-compatible.
#ifndef ANVIL_REWARD_BANDIT_H_
#define ANVIL_REWARD_BANDIT_H_

#include <string>
#include <vector>

namespace anvil {

class Ucb1 {
 public:
  // exploration: the c of mean + c * sqrt(2 ln N / n); 1 is UCB1's.
  explicit Ucb1(std::vector<std::string> arms, double exploration = 1.0);

  // The arm to pull next among those `allowed` (empty: all); -1 if none is.
  int Choose(const std::vector<bool>& allowed = {}) const;
  // Records one pull of `arm` with payoff clamped to [0, 1].
  void Update(int arm, double payoff);
  // Replaces an arm's statistics (for callers that keep their own counts).
  void Set(int arm, int pulls, double payoff_sum);

  const std::vector<std::string>& arms() const { return arms_; }
  int pulls(int arm) const { return pulls_[arm]; }
  double mean(int arm) const { return pulls_[arm] ? sum_[arm] / pulls_[arm] : 0; }
  // "llm/contrast: 0.31 over 12, embedded: 0.08 over 40" for progress lines.
  std::string Describe() const;

 private:
  std::vector<std::string> arms_;
  double exploration_;
  std::vector<int> pulls_;
  std::vector<double> sum_;
  int total_ = 0;
};

// A payoff in [0, 1] from a clipped reward: 0 for any failure, then linear
// from 0.1 at half the baseline's speed to 1 at `full` times its speed or more.
double RewardPayoff(double clipped_reward, bool passed, double full = 1.25);

}  // namespace anvil

#endif  // ANVIL_REWARD_BANDIT_H_
