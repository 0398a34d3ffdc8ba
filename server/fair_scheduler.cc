#include "server/fair_scheduler.h"

#include <algorithm>
#include <limits>

namespace anvil {

FairScheduler::FairScheduler(std::vector<std::string> proposers, SharePolicy* policy,
                             int pending_per_proposer)
    : names_(std::move(proposers)), policy_(policy), pending_per_proposer_(pending_per_proposer),
      in_flight_(names_.size(), 0), pending_count_(names_.size(), 0), exhausted_(names_.size(), false) {}

absl::Status FairScheduler::Refill(const ProposeFn& propose, std::vector<ProposerUsage>& usage,
                                   bool final_phase) {
  std::vector<bool> asked(names_.size(), false);
  while (true) {
    std::vector<bool> unavailable = exhausted_;
    for (size_t i = 0; i < asked.size(); ++i) unavailable[i] = unavailable[i] || asked[i];
    const int i = policy_->Next(names_, usage, unavailable);
    if (i < 0 || i >= static_cast<int>(asked.size()) || unavailable[i]) return absl::OkStatus();
    asked[i] = true;
    const int n = pending_per_proposer_ - pending_count_[i];
    if (n <= 0) continue;
    absl::StatusOr<std::vector<Proposal>> got = propose(i, n);
    if (!got.ok()) return got.status();
    if (got->empty() && pending_count_[i] == 0 && in_flight_[i] == 0 && !final_phase) exhausted_[i] = true;
    for (Proposal& p : *got) {
      ++pending_count_[i];
      ++usage[i].proposed;
      if (p.candidate.proposer().empty()) p.candidate.set_proposer(names_[i]);
      pool_.push_back({std::move(p), i, seq_++});
    }
  }
}

// The least-served problem a pending proposal would still be measured on
// (its candidates in this job, and in the round being picked); proposals for
// no active problem come first (they are skipped at once).
int FairScheduler::ServedKey(const Pending& pending, const std::vector<ProblemView>& problems) const {
  int key = std::numeric_limits<int>::max();
  for (int p : pending.proposal.problems) {
    if (p < 0 || p >= static_cast<int>(problems.size())) continue;
    if (!problems[p].active && !pending.proposal.recheck) continue;
    const int load = p < static_cast<int>(round_load_.size()) ? round_load_[p] : 0;
    key = std::min(key, problems[p].tried_this_job + load);
  }
  return key == std::numeric_limits<int>::max() ? -1 : key;
}

// The pending proposal of `proposer` serving the least-served problem
// (ties: the order proposed), of those `only` takes (empty: all), taken out
// of the pool.
std::optional<FairScheduler::Pending> FairScheduler::TakeNext(int proposer,
                                                              const std::vector<ProblemView>& problems,
                                                              const std::function<bool(const Proposal&)>& only) {
  auto best = pool_.end();
  for (auto it = pool_.begin(); it != pool_.end(); ++it) {
    if (it->proposer != proposer || (only && !only(it->proposal))) continue;
    if (best == pool_.end() || ServedKey(*it, problems) < ServedKey(*best, problems)) best = it;
  }
  if (best == pool_.end()) return std::nullopt;
  Pending p = std::move(*best);
  pool_.erase(best);
  --pending_count_[proposer];
  return p;
}

std::vector<FairScheduler::Pending> FairScheduler::PickRound(size_t n, const std::vector<ProblemView>& problems,
                                                             const std::vector<ProposerUsage>& spent,
                                                             const std::function<bool(const Proposal&)>& built,
                                                             size_t built_extra) {
  std::vector<ProposerUsage> usage = spent;  // this round's planned measurements counted
  std::vector<Pending> out;
  round_load_.assign(problems.size(), 0);  // what this round gives each problem so far
  size_t counted = 0, extra = 0;  // proposals counted against n; built ones beside them
  const size_t extra_cap = built ? built_extra : 0;
  while (counted < n || extra < extra_cap) {
    std::vector<bool> empty(names_.size());
    for (size_t i = 0; i < names_.size(); ++i) empty[i] = pending_count_[i] == 0;
    const int i = policy_->Next(names_, usage, empty);
    if (i < 0 || i >= static_cast<int>(names_.size()) || empty[i]) break;
    // Once n are counted, only built ones ride along.
    std::optional<Pending> p = TakeNext(i, problems, counted < n ? nullptr : built);
    if (!p) break;
    usage[i].gpu_seconds += static_cast<double>(p->proposal.problems.size());
    for (int q : p->proposal.problems) {
      if (q >= 0 && q < static_cast<int>(round_load_.size())) ++round_load_[q];
    }
    if (extra < extra_cap && built(p->proposal)) {
      ++extra;
    } else {
      ++counted;
    }
    out.push_back(std::move(*p));
  }
  round_load_.clear();
  for (const Pending& p : out) ++in_flight_[p.proposer];
  return out;
}

std::vector<FairScheduler::Pending> FairScheduler::TakeAllButRechecks() {
  std::vector<Pending> taken, keep;
  for (Pending& p : pool_) {
    if (p.proposal.recheck) {
      keep.push_back(std::move(p));
      continue;
    }
    --pending_count_[p.proposer];
    taken.push_back(std::move(p));
  }
  pool_ = std::move(keep);
  return taken;
}

bool FairScheduler::Planned(const std::string& candidate_id, int problem) const {
  return planned_.count({candidate_id, problem}) > 0;
}

int FairScheduler::PlannedOn(int problem) const {
  int n = 0;
  for (const auto& [id, q] : planned_) n += q == problem;
  return n;
}

void FairScheduler::Release(int i, const Proposal& proposal) {
  --in_flight_[i];
  if (proposal.recheck) return;
  for (int p : proposal.problems) planned_.erase({proposal.candidate.id(), p});
}

}  // namespace anvil
