// Fleet: the coordinator's side of the fleet (proto/anvil/v1/fleet.proto)
// without gRPC: worker registration and credentials, the task queue and its
// leases (kept in the store: store/SCHEMA.md, "Tasks"), long-polled leases,
// heartbeats, checked and idempotent results, quarantine on evidence,
// content-addressed artifacts, and the wait for a task's result that
// RemoteEvaluator uses. FleetService (fleet_service.h) puts it on the wire.
// The server never runs candidate code: it only moves tasks, results and
// artifact bytes.
//
// Identity: Register issues each worker a credential (32 random bytes; the
// store keeps its SHA-256). Every later call names the worker and carries
// the credential (Authenticate), so a worker can lease, renew and report
// only as itself, and only for its own leases.
//
// Policy: a measure task goes only to a GPU slot of the task's GPU model (a
// re-check not to the GPUs it avoids while another is live); a build task
// goes to a build slot, or to a GPU slot when no live worker has one. A
// worker is quarantined on evidence the server checked: `quarantine_after`
// consecutive failures of its own leases (infrastructure errors, malformed
// results), or figures that disagree with other workers' (Store::RecordEvidence).
//
// Tasks belong to jobs: Submit derives a task's id from its job and
// content, so a job resumed after a restart takes over the tasks its earlier
// run left (ParkJob, then Submit again) instead of measuring them twice;
// CancelJob drops a job's queued and running tasks.
//
// Thread-safety: every method may be called from any thread.
// REQUIRES: the store outlives the Fleet.
#ifndef ANVIL_SERVER_FLEET_FLEET_H_
#define ANVIL_SERVER_FLEET_FLEET_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "anvil/v1/fleet.pb.h"
#include "worker/candidate_evaluator.h"
#include "store/store.h"

namespace anvil {

struct FleetOptions {
  double lease_seconds = 30;          // a lease not renewed for this long expires
  double heartbeat_seconds = 5;       // what workers are told to heartbeat at
  int quarantine_after = 3;           // consecutive failures (or disagreements) that quarantine
  // How long a task waits for a live worker able to take it (a GPU worker of
  // its model; any worker for a build) before Await gives up.
  double worker_wait_seconds = 600;
  std::string artifact_dir;           // content-addressed artifacts (sha256 names)
  int64_t max_artifact_bytes = 256 << 20;
};

class Fleet {
 public:
  // REQUIRES: options.artifact_dir set; created when missing.
  static absl::StatusOr<std::unique_ptr<Fleet>> Create(Store* store, FleetOptions options);

  // The worker id is the hostname and a hash of it and the GPU UUIDs: a node
  // that registers again gets its id (and its quarantine) back, with a new
  // credential (the old one stops working).
  absl::StatusOr<v1::RegisterWorkerResponse> Register(const v1::RegisterWorkerRequest& request);
  // OK when `credential` is the one issued to `worker_id`. NotFound for an
  // unknown worker, Unauthenticated for another credential (both: register
  // again).
  absl::Status Authenticate(const std::string& worker_id, const std::string& credential);
  // Waits up to request.wait_s (finite, 0 to 60) for a task the slot can take;
  // an empty response when none came, the caller hung up (`gone`) or the
  // fleet shuts down. FailedPrecondition for a quarantined worker,
  // InvalidArgument for a GPU it did not register or a bad wait.
  absl::StatusOr<v1::LeaseResponse> Lease(const v1::LeaseRequest& request,
                                          const std::function<bool()>& gone = nullptr);
  // Puts a lease its caller never received back on the queue (the Lease call
  // was cancelled as the task was leased); counts against no one.
  void Unlease(const v1::Task& task, const std::string& worker_id);
  absl::StatusOr<v1::HeartbeatResponse> Heartbeat(const v1::HeartbeatRequest& request);
  // A result is checked before it is stored: a malformed one (figures that
  // are not numbers, another candidate or shape, missing measurements, an
  // artifact the server does not hold) is refused, its task queued again and
  // counted against the worker as evidence.
  absl::StatusOr<v1::ReportResultResponse> Report(const v1::ReportResultRequest& request);
  // InvalidArgument when the bytes do not hash to `sha256`.
  absl::Status PutArtifact(const std::string& sha256, const std::string& data);
  absl::StatusOr<std::string> GetArtifact(const std::string& sha256);
  absl::StatusOr<v1::ListWorkersResponse> ListWorkers();
  // An operator lifts a worker's quarantine; its status after. NotFound for
  // an unknown worker.
  absl::StatusOr<v1::WorkerStatus> ClearQuarantine(const std::string& worker_id);

  // Queues a task of a job (RemoteEvaluator) and returns its id. The id
  // comes from the job and the task's content: a task submitted again (a
  // resumed run of the job) is the stored one, taken over whatever its state,
  // so its work is done once. A recheck is a fresh measurement each time: it
  // takes over only a stored one whose result nobody collected.
  absl::StatusOr<std::string> Submit(const v1::Task& task, const std::string& gpu,
                                     const std::string& job_id,
                                     const std::vector<std::string>& avoid_gpus = {});
  // Blocks until the task is done (its accepted result, marked collected).
  // Cancelled when the task was cancelled or context.cancelled() turned
  // true (the task is left as it is); Unavailable when no live worker could
  // take it for worker_wait_seconds; DeadlineExceeded at `deadline`.
  absl::StatusOr<v1::ReportResultRequest> Await(const std::string& task_id, absl::Time deadline,
                                                const WorkContext& context = {});
  // Parks a job's queued tasks (a new run of it starts: it submits again
  // what it still wants); cancels every queued, parked and leased task of a
  // job (it ended), whose workers learn it at their next heartbeat.
  absl::Status ParkJob(const std::string& job_id);
  absl::Status CancelJob(const std::string& job_id);
  // The GPUs of live, unquarantined workers (one measure slot each), in the
  // order the workers registered.
  std::vector<v1::GpuInfo> LiveGpus();
  // Every worker the store knows (any state), in registration order.
  std::vector<WorkerRecord> Workers();
  // Until when a worker able to take tasks of `kind` ("build", or "measure"
  // on `gpu`) counts as live: past now while one is, 0 when none ever was.
  int64_t AbleUntilMs(const std::string& kind, const std::string& gpu);
  // Ends every Lease wait and Await at once (the server drains).
  void Shutdown();

  const FleetOptions& options() const { return options_; }

 private:
  Fleet(Store* store, FleetOptions options) : store_(store), options_(std::move(options)) {}
  absl::StatusOr<WorkerRecord> LiveWorker(const std::string& worker_id);
  // Whether a live, unquarantined worker has build slots (then GPU slots
  // only measure).
  bool BuildSlotsAlive();
  // The evidence path of Report: counts `why` against the worker, queues
  // the task again.
  absl::StatusOr<v1::ReportResultResponse> Refuse(const v1::ReportResultRequest& r, const TaskRecord& task,
                                                  const std::string& kind, const std::string& why);
  // Two events: a task was queued (wakes one lease waiter per task, not all
  // of them: a hundred idle workers must not stampede the store) and a result
  // came in (wakes every Await).
  enum class Event { kQueued, kResult };
  void Notify(Event event);
  int64_t LeaseMs() const { return static_cast<int64_t>(options_.lease_seconds * 1000); }

  Store* store_;
  const FleetOptions options_;
  // BuildSlotsAlive's answer, kept for a second (every lease asks).
  std::atomic<int64_t> build_alive_checked_ms_{0};
  std::atomic<bool> build_alive_{false};
  std::atomic<bool> shutdown_{false};
  absl::Mutex mu_;
  absl::CondVar queued_cv_, result_cv_;
  uint64_t queued_ ABSL_GUARDED_BY(mu_) = 0;  // bumped per event
  uint64_t results_ ABSL_GUARDED_BY(mu_) = 0;
  // Submissions one at a time: rechecks handed out by this process, by
  // content key, and their next ordinal.
  absl::Mutex submit_mu_;
  std::map<std::string, int> recheck_ordinal_ ABSL_GUARDED_BY(submit_mu_);
  // Waits until the event's count moves past `seen`, or `deadline`.
  void WaitFor(Event event, uint64_t seen, absl::Time deadline);
  uint64_t Count(Event event);
};

}  // namespace anvil

#endif  // ANVIL_SERVER_FLEET_FLEET_H_
