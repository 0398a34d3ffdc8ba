// BanditSharePolicy: the job's budget shared among its proposers by UCB1
// (reward/bandit.h) instead of equal shares. A proposer's pulls are the
// candidates it has had built or measured; its payoff is the fraction of
// them that improved a problem's best. A proposer that has not been tried
// goes first; one that pays gets more of the budget, and exploration never
// stops. Thread-compatible (one per job).
#ifndef ANVIL_SERVER_PROPOSERS_LLM_BANDIT_POLICY_H_
#define ANVIL_SERVER_PROPOSERS_LLM_BANDIT_POLICY_H_

#include <memory>
#include <string>
#include <vector>

#include "server/proposer_set.h"

namespace anvil {

class BanditSharePolicy : public SharePolicy {
 public:
  explicit BanditSharePolicy(double exploration = 0.5) : exploration_(exploration) {}
  int Next(const std::vector<std::string>& proposers, const std::vector<ProposerUsage>& usage,
           const std::vector<bool>& exhausted) override;
  // The last choice's statistics, "embedded: 0.10 over 40, llm: 0.25 over 8".
  const std::string& last() const { return last_; }

 private:
  double exploration_;
  std::string last_;
};

std::unique_ptr<SharePolicy> MakeBanditSharePolicy(double exploration = 0.5);

}  // namespace anvil

#endif  // ANVIL_SERVER_PROPOSERS_LLM_BANDIT_POLICY_H_
