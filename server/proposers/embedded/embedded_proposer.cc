#include "server/proposers/embedded/embedded_proposer.h"

#include <algorithm>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace anvil {

// The stages' RoundChannel: Exchange posts a round and waits; Propose hands
// it out; Observe answers it.
class EmbeddedProposer::Channel : public RoundChannel {
 public:
  absl::Status Exchange(std::vector<Proposal> proposals,
                        const std::function<void(size_t, const Observation&)>& take) override {
    mu_.Lock();
    round_ = std::move(proposals);
    answers_.assign(round_.size(), std::nullopt);
    taken_.assign(round_.size(), false);
    claimed_.assign(round_.size(), false);
    handed_ = 0;
    posted_ = true;
    size_t left = round_.size();
    while (left > 0) {
      auto fresh = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
        if (aborted_) return true;
        for (size_t i = 0; i < answers_.size(); ++i) {
          if (answers_[i] && !claimed_[i]) return true;
        }
        return false;
      };
      mu_.Await(absl::Condition(&fresh));
      if (aborted_) break;
      std::vector<std::pair<size_t, Observation>> got;
      for (size_t i = 0; i < answers_.size(); ++i) {
        if (answers_[i] && !claimed_[i]) {
          claimed_[i] = true;
          got.emplace_back(i, *answers_[i]);
        }
      }
      left -= got.size();
      mu_.Unlock();  // Observe waits for this, not for the lock
      for (const auto& [i, o] : got) take(i, o);
      mu_.Lock();
      for (const auto& [i, o] : got) taken_[i] = true;
    }
    posted_ = false;
    const bool aborted = aborted_;
    mu_.Unlock();
    if (aborted) return absl::CancelledError("the job stopped");
    return absl::OkStatus();
  }
  std::optional<v1::RunnerInfo> device() const override {
    absl::MutexLock lock(&mu_);
    return device_;
  }
  bool final_phase() const override {
    absl::MutexLock lock(&mu_);
    return final_phase_;
  }
  HistoryReader& history() override { return *history_; }
  double elapsed_at_start() const override { return elapsed_at_start_; }
  void set_elapsed_at_start(double s) { elapsed_at_start_ = s; }  // before the stages start

  // The coordinator's side.
  void See(const SearchView& view) {
    absl::MutexLock lock(&mu_);
    if (view.device) device_ = view.device;
    final_phase_ = view.final_phase;
    history_ = view.history;
  }
  // Waits until the stages post a round or end; hands out up to n of the
  // round's proposals (none while they wait for answers). The stages' error
  // once they have failed.
  absl::StatusOr<std::vector<Proposal>> Take(int n) {
    absl::MutexLock lock(&mu_);
    // A round wholly answered is one the stages are about to take in: wait
    // for their next round (returning none then would read as "done").
    auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      return done_ || aborted_ || (posted_ && (handed_ < round_.size() || !AllAnswered()));
    };
    mu_.Await(absl::Condition(&ready));
    if (!posted_ && done_ && !status_.ok()) return status_;
    std::vector<Proposal> out;
    while (posted_ && handed_ < round_.size() && static_cast<int>(out.size()) < n) {
      out.push_back(round_[handed_++]);
    }
    return out;
  }
  // Waits until the stages have taken in every answer given so far, so they
  // see each measurement at the time it was made (their clock, their budget).
  void AwaitTaken() {
    absl::MutexLock lock(&mu_);
    auto taken = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      if (aborted_ || done_ || !posted_) return true;
      for (size_t i = 0; i < answers_.size(); ++i) {
        if (answers_[i] && !taken_[i]) return false;
      }
      return true;
    };
    mu_.Await(absl::Condition(&taken));
  }
  void Answer(const Observation& o) {
    absl::MutexLock lock(&mu_);
    for (size_t i = 0; posted_ && i < round_.size(); ++i) {
      const Proposal& p = round_[i];
      if (!answers_[i] && p.candidate.id() == o.proposal.candidate.id() &&
          p.problems == o.proposal.problems && p.recheck == o.proposal.recheck) {
        answers_[i] = o;
        return;
      }
    }
  }
  void Done(absl::Status status) {
    absl::MutexLock lock(&mu_);
    done_ = true;
    status_ = std::move(status);
  }
  void Abort() {
    absl::MutexLock lock(&mu_);
    aborted_ = true;
  }

 private:
  bool AllAnswered() const ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return std::all_of(answers_.begin(), answers_.end(), [](const auto& a) { return a.has_value(); });
  }

  mutable absl::Mutex mu_;
  std::vector<Proposal> round_ ABSL_GUARDED_BY(mu_);
  std::vector<std::optional<Observation>> answers_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> claimed_ ABSL_GUARDED_BY(mu_);  // answers the stages are taking
  std::vector<bool> taken_ ABSL_GUARDED_BY(mu_);    // answers the stages have taken in
  size_t handed_ ABSL_GUARDED_BY(mu_) = 0;
  bool posted_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  bool aborted_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  std::optional<v1::RunnerInfo> device_ ABSL_GUARDED_BY(mu_);
  bool final_phase_ ABSL_GUARDED_BY(mu_) = false;
  HistoryReader* history_ = nullptr;  // set by See before the stages start; the run's
  double elapsed_at_start_ = 0;       // set before the stages start
};

EmbeddedProposer::EmbeddedProposer(EmbeddedProposerOptions options)
    : options_(std::move(options)), channel_(std::make_unique<Channel>()) {}

EmbeddedProposer::~EmbeddedProposer() {
  channel_->Abort();
  if (thread_.joinable()) thread_.join();
}

const std::string& EmbeddedProposer::name() const {
  static const std::string kName = "embedded";
  return kName;
}

void EmbeddedProposer::Start(const SearchView& view) {
  std::vector<ShapeSpec> problems;
  for (const ProblemView& p : view.problems) problems.push_back(p.spec);
  SearchOptions o = options_.search;
  if (view.budget_seconds > 0) o.budget_seconds = std::min(o.budget_seconds, view.budget_seconds);
  o.figure = view.figure;
  channel_->set_elapsed_at_start(view.elapsed_seconds);
  thread_ = std::thread([this, problems, o, job_id = view.job_id] {
    ProgressFn progress = options_.progress ? options_.progress : [](const std::string&) {};
    absl::StatusOr<SearchResult> r = RunStages(options_.seeds, problems, job_id, *channel_, o, progress);
    if (options_.on_done) options_.on_done(r);
    channel_->Done(r.status());
  });
}

absl::StatusOr<std::vector<Proposal>> EmbeddedProposer::Propose(const SearchView& view, int n) {
  channel_->See(view);
  if (!thread_.joinable()) Start(view);
  return channel_->Take(n);
}

void EmbeddedProposer::Observe(const SearchView& view, std::span<const Observation> results) {
  channel_->See(view);
  for (const Observation& o : results) channel_->Answer(o);
  channel_->AwaitTaken();
}

}  // namespace anvil
