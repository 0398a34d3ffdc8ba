// JobRun: one run of one job, the loop drawn in server/job_service.h:
// share policy -> proposers -> fair scheduler -> precheck -> build -> measure
// -> measure callbacks -> proposers' Observe, with budgets checked between
// rounds. Internal to JobService (which owns the job's lifecycle in the store).
// Thread-compatible: Run on one thread; Cancel and Stop from any thread.
#ifndef ANVIL_SERVER_JOB_RUN_H_
#define ANVIL_SERVER_JOB_RUN_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <optional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/evaluator.h"
#include "server/history.h"
#include "server/job_events.h"
#include "server/job_service.h"
#include "server/measure_callbacks.h"
#include "server/proposer.h"
#include "store/store.h"

namespace anvil {

struct JobRunOptions {
  Store* store = nullptr;
  CandidateEvaluator* evaluator = nullptr;
  std::vector<std::unique_ptr<Proposer>> proposers;
  std::unique_ptr<SharePolicy> policy;
  std::function<std::chrono::steady_clock::time_point()> clock;
  int build_chunk = 16;
  int pending_per_proposer = 256;
  double plateau_gain = 0.005;
  double cross_check_tolerance = 0.25;        // JobServiceOptions::cross_check_tolerance
  int quarantine_after = 3;                   // JobServiceOptions::quarantine_after
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
  struct Pending {
    Proposal proposal;
    int proposer = 0;
    int64_t seq = 0;
  };
  // A picked round: its observations-to-be, and its builds under way.
  struct Round {
    std::vector<Observation> obs;
    std::vector<size_t> to_build;  // obs indices being built, in build order
    std::future<std::vector<absl::StatusOr<v1::Build>>> builds;
  };
  struct ProblemState {
    std::set<std::string> measured;  // candidate ids measured on it, any job
    std::set<std::string> tried;     // of which in this job (re-checks count once)
    int since_gain = 0;              // this job's candidates since its best improved
    std::string best_id;             // this job's fastest correct
    std::string verified_id;         // this job's fastest verified (reported)
    double verified_us = 0, verified_baseline_us = 0;
    std::string status;              // why it stopped; "" while active
    // GPUs that measured a candidate on it (not re-checks): its re-checks go elsewhere.
    std::map<std::string, std::set<std::string>> measured_by;
  };

  // The context of every evaluator call: this job, abandoned when it stops.
  WorkContext Context() const;
  // A call the job's own stop or cancel interrupted ends the run as such;
  // anything else is Anvil failing.
  absl::StatusOr<v1::JobState> Interrupted(const absl::Status& status);
  // Says once, as a log event, why the evaluator is not progressing (or that
  // it is again).
  void NoteWaiting();
  absl::Status Init();
  absl::Status SetKeys(const v1::RunnerInfo& device);
  absl::Status LoadHistory();
  void Take(int p, const v1::Measurement& m, bool verified_here);
  SearchView View();
  absl::Status Refill();
  std::vector<Pending> PickRound();
  int ServedKey(const Pending& pending) const;
  std::optional<Pending> TakeNext(int proposer);
  Observation Precheck(Pending& pending, bool probe);
  int ProposerIndex(const Observation& o) const;
  absl::StatusOr<std::optional<Round>> PrepareRound();
  absl::Status FinishBuilds(Round& r);
  std::string SkipNow(const Proposal& p);
  std::optional<MeasureRequest> Admit(Observation& o, std::vector<Observation>& rest);
  absl::Status Complete(Observation o, std::vector<absl::StatusOr<MeasureResult>> results);
  absl::Status MeasureRound(Round& r);
  void Release(const std::vector<Observation>& round);
  int PlannedOn(int p) const;
  std::vector<v1::LtAlgo> StoredLtAlgos(const std::vector<int>& problems);
  absl::Status Finish(std::vector<Observation>& round, std::vector<v1::LtAlgo> tuned, bool checkpoint);
  void Account(const std::vector<Observation>& round);
  void UpdateStatus(int p);
  v1::ProblemProgress Progress(int p) const;
  absl::Status Checkpoint();
  void ObserveAll(std::vector<Observation>& round);
  bool BudgetSpent();
  absl::Status FinalPhase();
  void SkipPending(const std::string& reason);
  void Emit(JobEventKind kind, std::string message, int problem = -1);
  void Emitted(JobEvent e);
  double Elapsed() const;
  CoordinatorTime Coordinator() const;

  const std::string job_id_;
  const v1::OptimizeKernelRequest request_;
  JobRunOptions options_;
  StoreHistory history_;
  std::vector<std::unique_ptr<MeasureCallback>> callbacks_;
  std::vector<ProblemView> problems_;
  std::vector<ProblemState> state_;
  bool keyed_ = false;                    // problems carry the GPU
  std::vector<Pending> pool_;
  std::vector<int> round_load_;           // [problem]: proposals picked for it this round
  // (candidate, problem) pairs picked and not yet observed (re-checks aside).
  std::set<std::pair<std::string, int>> planned_pairs_;
  std::vector<int> in_flight_;            // [proposer]: proposals picked, not yet observed
  std::map<std::string, v1::Build> built_;  // passed builds of this run, by candidate id
  std::set<int> lt_looked_up_;            // problems whose stored cuBLASLt choice was sent
  int64_t seq_ = 0;
  std::vector<ProposerUsage> usage_;
  std::vector<int> pending_count_;        // [proposer]
  std::vector<bool> exhausted_;           // [proposer]
  bool final_phase_ = false;
  int final_rounds_ = 0;
  static constexpr int kMaxFinalRounds = 64;
  double prior_wall_ = 0, prior_gpu_ = 0; // earlier runs'
  double gpu_ = 0;                        // this run's
  double checkpointed_wall_ = 0, checkpointed_gpu_ = 0;
  std::chrono::steady_clock::time_point start_;
  // The coordinator's own time (job_events.h), by the real clock.
  std::chrono::steady_clock::time_point real_start_;
  CoordinatorTime coordinator_;
  std::atomic<bool> cancelled_{false};
  std::atomic<bool> stopped_{false};
  std::string waiting_;                   // what the evaluator's Waiting() said last
};

}  // namespace anvil

#endif  // ANVIL_SERVER_JOB_RUN_H_
