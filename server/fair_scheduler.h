// FairScheduler: a job's pending proposals and the rounds picked from them.
// Proposers are asked in the share policy's order up to each one's pending
// allowance (Refill); a round gives each slot to the proposer the policy
// names, and of its proposals to the one serving the least-served problem,
// so that no layout or family waits behind another's long plan (PickRound).
// It also keeps the (candidate, problem) pairs picked and not yet observed,
// so that no pair is planned twice. Part of JobRun (server/job_run.h).
// Thread-compatible (the job's thread).
#ifndef ANVIL_SERVER_FAIR_SCHEDULER_H_
#define ANVIL_SERVER_FAIR_SCHEDULER_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "server/job_events.h"
#include "server/proposer.h"
#include "server/proposer_set.h"

namespace anvil {

class FairScheduler {
 public:
  struct Pending {
    Proposal proposal;
    int proposer = 0;
    int64_t seq = 0;
  };
  // Asks proposer i for at most n proposals.
  using ProposeFn = std::function<absl::StatusOr<std::vector<Proposal>>(int i, int n)>;

  // REQUIRES: policy outlives the scheduler.
  FairScheduler(std::vector<std::string> proposers, SharePolicy* policy, int pending_per_proposer);

  // Asks each proposer at most once, in the policy's order, for proposals up
  // to its pending allowance; `usage[i].proposed` counts them. A proposer
  // that proposes nothing with nothing pending or in flight is exhausted
  // (outside the final phase).
  absl::Status Refill(const ProposeFn& propose, std::vector<ProposerUsage>& usage, bool final_phase);
  // Up to n pending proposals for the next round (see the file comment);
  // `usage` is what each proposer has spent so far. With `built` (true for a
  // proposal whose candidate needs no build), those do not count against n,
  // up to `built_extra` of them: a round's builds stay n while what is built
  // already is measured meanwhile.
  std::vector<Pending> PickRound(size_t n, const std::vector<ProblemView>& problems,
                                 const std::vector<ProposerUsage>& usage,
                                 const std::function<bool(const Proposal&)>& built = nullptr,
                                 size_t built_extra = 0);
  // The pending proposals other than re-checks, taken out of the pool.
  std::vector<Pending> TakeAllButRechecks();
  // The final phase starts: every proposer may propose (re-checks) again.
  void ResetExhausted() { exhausted_.assign(exhausted_.size(), false); }

  // (candidate, problem) pairs planned: picked and not yet observed.
  bool Planned(const std::string& candidate_id, int problem) const;
  void Plan(const std::string& candidate_id, int problem) { planned_.insert({candidate_id, problem}); }
  int PlannedOn(int problem) const;
  // A picked proposal of proposer i was observed: its plan is forgotten.
  void Release(int i, const Proposal& proposal);

 private:
  int ServedKey(const Pending& pending, const std::vector<ProblemView>& problems) const;
  std::optional<Pending> TakeNext(int proposer, const std::vector<ProblemView>& problems,
                                  const std::function<bool(const Proposal&)>& only = nullptr);

  const std::vector<std::string> names_;
  SharePolicy* const policy_;
  const int pending_per_proposer_;
  std::vector<Pending> pool_;
  std::vector<int> round_load_;   // [problem]: proposals picked for it this round
  std::set<std::pair<std::string, int>> planned_;
  std::vector<int> in_flight_;    // [proposer]: proposals picked, not yet observed
  std::vector<int> pending_count_;
  std::vector<bool> exhausted_;
  int64_t seq_ = 0;
};

}  // namespace anvil

#endif  // ANVIL_SERVER_FAIR_SCHEDULER_H_
