// Fleet: the coordinator's side of the fleet (proto/anvil/v1/fleet.proto)
// without gRPC: worker registration, the task queue and its leases (kept in
// the store: store/SCHEMA.md, "Tasks"), long-polled leases, heartbeats,
// idempotent results, quarantine, content-addressed artifacts, and the wait
// for a task's result that RemoteEvaluator uses. FleetService
// (fleet_service.h) puts it on the wire. The server never runs candidate
// code: it only moves tasks, results and artifact bytes.
//
// Policy: a measure task goes only to a GPU slot of the task's GPU model; a
// build task goes to a build-only worker (no GPU), or to a GPU worker when no
// build-only worker is alive. A worker whose `quarantine_after` consecutive
// reports name an infrastructure error (not the candidate's) is quarantined:
// it gets no more tasks until an operator clears it.
//
// Thread-safety: every method may be called from any thread.
// REQUIRES: the store outlives the Fleet.
#ifndef ANVIL_SERVER_FLEET_FLEET_H_
#define ANVIL_SERVER_FLEET_FLEET_H_

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "anvil/v1/fleet.pb.h"
#include "store/store.h"

namespace anvil {

struct FleetOptions {
  double lease_seconds = 30;          // a lease not renewed for this long expires
  double heartbeat_seconds = 5;       // what workers are told to heartbeat at
  int quarantine_after = 3;           // consecutive infrastructure failures
  std::string artifact_dir;           // content-addressed artifacts (sha256 names)
  int64_t max_artifact_bytes = 256 << 20;
};

class Fleet {
 public:
  // REQUIRES: options.artifact_dir set; created when missing.
  static absl::StatusOr<std::unique_ptr<Fleet>> Create(Store* store, FleetOptions options);

  // The worker id is the hostname and a hash of it and the GPU UUIDs: a node
  // that registers again gets its id (and its quarantine) back.
  absl::StatusOr<v1::RegisterWorkerResponse> Register(const v1::RegisterWorkerRequest& request);
  // Waits up to request.wait_s for a task the slot can take; an empty
  // response when none came. FailedPrecondition for a quarantined worker,
  // NotFound for an unknown one, InvalidArgument for a GPU it did not register.
  absl::StatusOr<v1::LeaseResponse> Lease(const v1::LeaseRequest& request);
  absl::StatusOr<v1::HeartbeatResponse> Heartbeat(const v1::HeartbeatRequest& request);
  absl::StatusOr<v1::ReportResultResponse> Report(const v1::ReportResultRequest& request);
  // InvalidArgument when the bytes do not hash to `sha256`.
  absl::Status PutArtifact(const std::string& sha256, const std::string& data);
  absl::StatusOr<std::string> GetArtifact(const std::string& sha256);
  absl::StatusOr<v1::ListWorkersResponse> ListWorkers();
  // An operator lifts a worker's quarantine; its status after. NotFound for
  // an unknown worker.
  absl::StatusOr<v1::WorkerStatus> ClearQuarantine(const std::string& worker_id);

  // Queues a task (RemoteEvaluator). `task` carries kind, candidate, problems.
  // Returns its id.
  absl::StatusOr<std::string> Submit(const v1::Task& task, const std::string& gpu,
                                     const std::string& job_id = "");
  // Blocks until the task is done (its accepted result) or the deadline
  // (DeadlineExceeded; the task stays queued).
  absl::StatusOr<v1::ReportResultRequest> Await(const std::string& task_id, absl::Time deadline);
  // The GPUs of live, unquarantined workers (one measure slot each), in the
  // order the workers registered.
  std::vector<v1::GpuInfo> LiveGpus();

  const FleetOptions& options() const { return options_; }

 private:
  Fleet(Store* store, FleetOptions options) : store_(store), options_(std::move(options)) {}
  absl::StatusOr<WorkerRecord> LiveWorker(const std::string& worker_id);
  // Whether a live, unquarantined worker has build slots (then GPU slots
  // only measure).
  bool BuildSlotsAlive();
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
  absl::Mutex mu_;
  absl::CondVar queued_cv_, result_cv_;
  uint64_t queued_ ABSL_GUARDED_BY(mu_) = 0;  // bumped per event
  uint64_t results_ ABSL_GUARDED_BY(mu_) = 0;
  // Waits until the event's count moves past `seen`, or `deadline`.
  void WaitFor(Event event, uint64_t seen, absl::Time deadline);
  uint64_t Count(Event event);
};

}  // namespace anvil

#endif  // ANVIL_SERVER_FLEET_FLEET_H_
