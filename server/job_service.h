// JobService: the coordinator. A search is a job with an id, stored in the
// store, run by this service, watched, cancelled and resumed. `anvil
// optimize` runs it in-process with a LocalEvaluator (local mode); `anvil
// serve` runs the same service behind gRPC.
//
// ARCHITECTURE (one job; MetaSchedule's loop):
//
//   JobService::Run(job)
//     loop until the budget is spent or every proposer is done:
//       scheduler ---- SharePolicy picks the proposer; problems served fairly
//         |              (least-served problem first, per layout and family)
//         v
//       Proposer::Propose(view, n) -> proposals {candidate, problems}
//         v
//       precheck ----- drop pairs measured before, problems out of budget
//         v
//       CandidateEvaluator::Build(round)     (next round builds while ...)
//         v
//       CandidateEvaluator::Measure(round)   (... this one is measured)
//         v
//       MeasureCallbacks: store -> rewards -> progress events
//         v                  (the store is written here and nowhere else)
//       Proposer::Observe(observations)
//     final phase: proposers' re-checks (verify), measured regardless of budget
//
// Budgets (proto v1::Budget, zero: Options' defaults): per job the wall time
// and GPU seconds; per problem the candidates measured, a plateau (candidates
// without a 0.5% gain) and a target efficiency (fraction of speed-of-light).
// A job's wall and GPU seconds add up over its runs, so a resumed job spends
// only what is left. Resuming measures nothing twice: the precheck drops
// every (candidate, problem) pair the store holds already, except re-checks.
//
// Thread-safety: thread-safe. Each running job owns one thread (Start) or
// the caller's thread (Run); watchers' callbacks run on the job's thread and
// must not block. Everything persists through the one Store of the Options.
#ifndef ANVIL_SERVER_JOB_SERVICE_H_
#define ANVIL_SERVER_JOB_SERVICE_H_

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "anvil/v1/kernel_search.pb.h"
#include "worker/candidate_evaluator.h"
#include "server/job_events.h"
#include "server/job_options.h"
#include "server/proposer.h"
#include "server/proposer_set.h"
#include "store/store.h"

namespace anvil {

// What a service is made of; its JobOptions (job_options.h) pass down to
// every job's run. Assembled in one place: server/proposers/job_setup.h.
struct JobServiceOptions : JobOptions {
  Store* store = nullptr;                    // REQUIRES: non-null, outlives the service
  // The GPU this service measures on. (An evaluator per GPU model comes with
  // the fleet: a job whose problems name another GPU is refused Unavailable.)
  CandidateEvaluator* evaluator = nullptr;   // REQUIRES: non-null, outlives the service
  ProposerFactory proposers;                 // REQUIRES: set
  std::function<std::unique_ptr<SharePolicy>()> share_policy;  // empty: equal shares
  // The clock budgets are measured on (tests pass a fake); empty: steady_clock.
  std::function<std::chrono::steady_clock::time_point()> clock;
  std::function<std::string()> new_job_id;   // empty: "job-<unix ns>"
};

// A watcher's registration; destroying it (or Cancel) stops the callbacks.
class Watch {
 public:
  virtual ~Watch() = default;
};

class JobRun;  // server/job_run.h

class JobService {
 public:
  static absl::StatusOr<std::unique_ptr<JobService>> Create(JobServiceOptions options);
  ~JobService();  // cancels nothing: stops running jobs at a checkpoint (they resume)

  // Stores a new job (QUEUED) for the request and returns it. With a
  // non-empty request_id the call is idempotent: the same id and body return
  // the job made the first time, the same id with another body is
  // AlreadyExists. InvalidArgument for a malformed problem, figure or budget.
  absl::StatusOr<v1::Job> CreateJob(const v1::OptimizeKernelRequest& request,
                                    const std::string& request_id = "");
  // Runs a stored job on the caller's thread until it ends (local mode) and
  // returns it. A job that was running when its process died resumes.
  absl::StatusOr<v1::Job> RunJob(const std::string& job_id);
  // Runs it on a thread of its own; returns at once. FailedPrecondition if it
  // is running already or has ended.
  absl::Status StartJob(const std::string& job_id);
  // Starts every job the store holds as QUEUED or RUNNING (after a restart),
  // each on its own: a job that cannot be resumed (its proposers cannot be
  // made any more, say) is marked FAILED with the reason and the rest go on.
  // Returns how many started; an error only when the store cannot list them.
  absl::StatusOr<int> ResumeInterrupted();
  // Stops a job at once (waits on the evaluator end; what is in flight is
  // abandoned); CANCELLED, and its work queued or running on a fleet is
  // dropped. What was measured stays.
  absl::StatusOr<v1::Job> CancelJob(const std::string& job_id);
  absl::StatusOr<v1::Job> GetJob(const std::string& job_id);
  absl::StatusOr<std::vector<v1::Job>> ListJobs(int limit = 100,
                                                v1::JobState state = v1::JOB_STATE_UNSPECIFIED);
  // Calls `fn` with every later event of the job (its state first); NotFound
  // for an unknown job. Events of an ended job: its final state only.
  absl::StatusOr<std::unique_ptr<Watch>> WatchJob(const std::string& job_id,
                                                  std::function<void(const JobEvent&)> fn);
  // Stops every running job at its next checkpoint, leaving it RUNNING in the
  // store (the next process resumes it), and waits for their threads.
  void Shutdown();

 private:
  explicit JobService(JobServiceOptions options);
  struct Watcher;
  class WatchHandle;
  void Emit(const std::string& job_id, const JobEvent& event);
  absl::StatusOr<v1::OptimizeKernelRequest> Complete(const v1::OptimizeKernelRequest& request) const;
  absl::StatusOr<std::shared_ptr<JobRun>> Prepare(const std::string& job_id);
  absl::StatusOr<v1::Job> Finish(const std::string& job_id, JobRun& run,
                                 const absl::StatusOr<v1::JobState>& end);

  JobServiceOptions options_;
  absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<JobRun>> running_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::thread> threads_ ABSL_GUARDED_BY(mu_);
  std::multimap<std::string, std::shared_ptr<Watcher>> watchers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace anvil

#endif  // ANVIL_SERVER_JOB_SERVICE_H_
