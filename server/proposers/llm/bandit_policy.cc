#include "server/proposers/llm/bandit_policy.h"

#include "reward/bandit.h"

namespace anvil {

int BanditSharePolicy::Next(const std::vector<std::string>& proposers,
                            const std::vector<ProposerUsage>& usage,
                            const std::vector<bool>& exhausted) {
  Ucb1 bandit(proposers, exploration_);
  std::vector<bool> allowed(proposers.size());
  for (size_t i = 0; i < proposers.size(); ++i) {
    const ProposerUsage& u = usage[i];
    bandit.Set(int(i), u.measurements + u.build_failures, u.improvements);
    allowed[i] = !exhausted[i];
  }
  last_ = bandit.Describe();
  return bandit.Choose(allowed);
}

std::unique_ptr<SharePolicy> MakeBanditSharePolicy(double exploration) {
  return std::make_unique<BanditSharePolicy>(exploration);
}

}  // namespace anvil
