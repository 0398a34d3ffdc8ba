// JobRun: one run of one job, the loop drawn in server/job_service.h:
// share policy -> proposers -> fair scheduler -> precheck -> build -> measure
// -> measure callbacks -> proposers' Observe, with budgets checked between
// rounds. Internal to JobService (which owns the job's lifecycle in the store).
// Its parts, one concern each: the fair scheduler (fair_scheduler.h), the
// per-problem ledger (problem_ledger.h), the job's clock and budget
// (job_budget.h); the build/measure pipeline of a round is job_round.cc.
// Thread-compatible: Run on one thread; Cancel and Stop from any thread.
#ifndef ANVIL_SERVER_JOB_RUN_H_
#define ANVIL_SERVER_JOB_RUN_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/fair_scheduler.h"
#include "server/history.h"
#include "server/job_budget.h"
#include "server/job_events.h"
#include "server/job_options.h"
#include "server/measure_callbacks.h"
#include "server/problem_ledger.h"
#include "server/proposer.h"
#include "server/proposer_set.h"
#include "store/store.h"
#include "worker/candidate_evaluator.h"

namespace anvil {

// The service's JobOptions, and what this run of the job is given.
struct JobRunOptions : JobOptions {
  Store* store = nullptr;
  CandidateEvaluator* evaluator = nullptr;
  std::vector<std::unique_ptr<Proposer>> proposers;
  std::unique_ptr<SharePolicy> policy;
  std::function<std::chrono::steady_clock::time_point()> clock;
  std::function<void(const JobEvent&)> emit;  // to the job's watchers
};

class JobRun {
 public:
  // REQUIRES: request's budget and figure complete (JobService fills defaults).
  JobRun(std::string job_id, v1::OptimizeKernelRequest request, JobRunOptions options);

  // Runs until the job ends: SUCCEEDED (budget spent or nothing more to
  // propose), CANCELLED (Cancel), or RUNNING (Stop: resumed by a later run).
  // The store's job state is the caller's to write.
  absl::StatusOr<v1::JobState> Run();
  void Cancel() { cancelled_ = true; }
  void Stop() { stopped_ = true; }
  bool cancelled() const { return cancelled_; }
  // The job as this run sees it (job thread only).
  v1::Job Snapshot(v1::JobState state) const;

 private:
  using Pending = FairScheduler::Pending;
  // What a round's threads hand the job thread: builds as they end (where the
  // evaluator streams them), the end of the Build call, and the measurement
  // calls that have come back.
  struct RoundSync {
    absl::Mutex mu;
    std::vector<std::pair<size_t, absl::StatusOr<v1::Build>>> built ABSL_GUARDED_BY(mu);  // (to_build index, result)
    bool builds_done ABSL_GUARDED_BY(mu) = false;
    std::vector<int> came_back ABSL_GUARDED_BY(mu);
    // What the job thread waits for: a call back, a build ended, or (while
    // it has not taken them) the Build call's answer.
    struct Wake {
      RoundSync* sync;
      bool builds_pending;
    };
    static bool Woken(Wake* w) ABSL_NO_THREAD_SAFETY_ANALYSIS {  // called with mu held
      return !w->sync->came_back.empty() || !w->sync->built.empty() ||
             (w->builds_pending && w->sync->builds_done);
    }
  };
  // A picked round: its observations-to-be, and its builds under way.
  struct Round {
    std::vector<Observation> obs;
    std::vector<size_t> to_build;    // obs indices being built, in build order
    std::vector<bool> build_known;   // [k]: to_build[k]'s build is in its observation
    std::shared_ptr<RoundSync> sync = std::make_shared<RoundSync>();
    std::future<std::vector<absl::StatusOr<v1::Build>>> builds;
    // [i]: obs[i] moved into the round measured before this one (MoveBuilt).
    std::vector<bool> moved;
    bool Built(size_t i) const;      // obs[i] needs no build, or has it
    bool AllBuilt() const { return std::find(build_known.begin(), build_known.end(), false) == build_known.end(); }
  };

  // The loop (job_run.cc).
  absl::Status Init();
  absl::Status SetKeys(const v1::RunnerInfo& device);
  absl::StatusOr<v1::JobState> Loop();
  absl::Status StopRounds(std::optional<Round> next);
  // A call the job's own stop or cancel interrupted ends the run as such;
  // anything else is Anvil failing.
  absl::StatusOr<v1::JobState> Interrupted(const absl::Status& status);
  // The context of every evaluator call: this job, abandoned when it stops.
  WorkContext Context() const;
  // Says once, as a log event, why the evaluator is not progressing (or that
  // it is again).
  void NoteWaiting();
  SearchView View(int proposer);
  int ProposerIndex(const Observation& o) const;
  bool BudgetSpent();
  absl::Status FinalPhase();
  absl::Status Checkpoint();
  absl::Status ObserveAll(std::vector<Observation>& round);
  // Hands SearchView::records to the measure callbacks.
  absl::Status KeepRecords();
  absl::Status Persist(std::vector<Observation>& round, std::vector<v1::LtAlgo> tuned,
                       std::vector<ProposerRecord> records);
  void Emit(JobEventKind kind, std::string message, int problem = -1, std::string proposer = "");
  void Emitted(JobEvent e);
  CoordinatorTime Coordinator() const;

  // A round's pipeline (job_round.cc).
  absl::StatusOr<std::optional<Round>> PrepareRound();
  Observation Precheck(Pending& pending, bool probe);
  // Proposals in the probe round (before the GPU is known): one per layout.
  static constexpr size_t kProbeProposals = 2;
  // Takes the builds that have ended into their observations (a failed one
  // is measured nowhere); FinishBuilds first waits for all.
  absl::Status TakeBuilds(Round& r);
  absl::Status ApplyBuild(Round& r, size_t k, const absl::StatusOr<v1::Build>& build);
  absl::Status FinishBuilds(Round& r);
  std::string SkipNow(const Proposal& p, double ahead_s = 0);
  std::optional<MeasureRequest> Admit(Observation& o, std::vector<Observation>& rest, double ahead_s);
  // One Measure call of a round: its proposals, their requests, its answer.
  struct Call {
    std::vector<Observation> obs;
    std::vector<MeasureRequest> requests;
    std::future<std::vector<absl::StatusOr<MeasureResult>>> results;
    double projected_s = 0;  // its items' time by seconds_per_item_
    std::chrono::steady_clock::time_point sent_at;
  };
  // A call waiting behind another is made up this long before that one's
  // projected end: about a runner's start-up and the coordinator's turn.
  static constexpr double kFormAheadSeconds = 2.0;
  bool FormNow(const std::map<int, Call>& flying) const;
  absl::Status MoveBuilt(Round& from, Round& into, std::vector<bool>& handled);
  // `ahead_s`: the projected time of the calls in flight before it.
  Call NextCall(Round& r, std::vector<bool>& handled, std::vector<Observation>& rest, double ahead_s);
  bool UnmeasuredProblems() const;
  static constexpr double kCoverSeconds = 60;  // NextCall's first-measurement rule
  std::optional<int> AwaitCallOrBuild(Round& r, bool idle);
  // Measures the round as its builds end; once they all have, `next` (when
  // given and empty) becomes the next round, building meanwhile.
  absl::Status MeasureRound(Round& r, std::optional<Round>* next);
  absl::Status Complete(Observation o, absl::StatusOr<MeasureResult> result);
  std::vector<v1::LtAlgo> StoredLtAlgos(const std::vector<int>& problems);
  absl::Status Finish(std::vector<Observation>& round, std::vector<v1::LtAlgo> tuned, bool checkpoint);
  void Release(const std::vector<Observation>& round);

  const std::string job_id_;
  const v1::OptimizeKernelRequest request_;
  JobRunOptions options_;
  StoreHistory history_;
  std::vector<std::unique_ptr<MeasureCallback>> callbacks_;
  std::vector<ProposerRecord> records_;     // what the proposers asked to keep (SearchView::records)
  ProblemLedger ledger_;
  FairScheduler scheduler_;
  JobBudget budget_;
  std::map<std::string, v1::Build> built_;  // passed builds of this run, by candidate id
  std::set<int> lt_looked_up_;              // problems whose stored cuBLASLt choice was sent
  std::vector<ProposerUsage> usage_;        // [proposer]
  bool final_phase_ = false;
  int final_rounds_ = 0;
  static constexpr int kMaxFinalRounds = 64;
  // The coordinator's own time (job_events.h), by the real clock.
  std::chrono::steady_clock::time_point real_start_;
  CoordinatorTime coordinator_;
  std::atomic<bool> cancelled_{false};
  std::atomic<bool> stopped_{false};
  std::string waiting_;                     // what the evaluator's Waiting() said last
  double seconds_per_item_ = 0;             // runner seconds per (candidate, problem), lately
};

}  // namespace anvil

#endif  // ANVIL_SERVER_JOB_RUN_H_
