// A job's proposers and the policy that shares its budget among them: what
// the coordinator (server/job_service.h) is given to run a job, made by
// server/proposers/factory.h for the node's proposers or by a test.
// Thread-safety: a ProposerFactory may be called from any thread; a
// SharePolicy is thread-compatible (one per job, the job's thread).
#ifndef ANVIL_SERVER_PROPOSER_SET_H_
#define ANVIL_SERVER_PROPOSER_SET_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "anvil/v1/kernel_search.pb.h"
#include "server/job_events.h"
#include "server/proposer.h"

namespace anvil {

// Shares a job's budget among its proposers. Asked before each Propose.
class SharePolicy {
 public:
  virtual ~SharePolicy() = default;
  // Which of `proposers` to ask next, or -1 for none. `usage` is what each has
  // spent ([i] answers proposers[i]); `exhausted[i]`: it proposed nothing
  // new with nothing pending.
  virtual int Next(const std::vector<std::string>& proposers,
                   const std::vector<ProposerUsage>& usage,
                   const std::vector<bool>& exhausted) = 0;
};

// The default: equal GPU-second shares (the proposer that has spent least
// goes next; ties by order). With an LLM proposer in the set the recipe
// bandit shares instead (server/proposers/llm/bandit_policy.h).
std::unique_ptr<SharePolicy> MakeEqualSharePolicy();

// Makes a job's proposers from its request (request.proposer: "embedded",
// "llm", or several comma-separated). InvalidArgument for an unknown name.
using ProposerFactory = std::function<absl::StatusOr<std::vector<std::unique_ptr<Proposer>>>(
    const v1::OptimizeKernelRequest& request)>;

struct ProposerSet {
  ProposerFactory factory;
  std::function<std::unique_ptr<SharePolicy>()> share_policy;  // empty: equal shares
};

}  // namespace anvil

#endif  // ANVIL_SERVER_PROPOSER_SET_H_
