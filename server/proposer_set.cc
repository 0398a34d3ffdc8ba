// The default SharePolicy (proposer_set.h): equal GPU-second shares among a job's proposers.
#include "server/proposer_set.h"

namespace anvil {
namespace {

class EqualSharePolicy : public SharePolicy {
 public:
  int Next(const std::vector<std::string>& proposers, const std::vector<ProposerUsage>& usage,
           const std::vector<bool>& exhausted) override {
    int best = -1;
    for (size_t i = 0; i < proposers.size(); ++i) {
      if (i < exhausted.size() && exhausted[i]) continue;
      const double spent = i < usage.size() ? usage[i].gpu_seconds : 0;
      if (best < 0 || spent < usage[best].gpu_seconds) best = static_cast<int>(i);
    }
    return best;
  }
};

}  // namespace

std::unique_ptr<SharePolicy> MakeEqualSharePolicy() { return std::make_unique<EqualSharePolicy>(); }

}  // namespace anvil
