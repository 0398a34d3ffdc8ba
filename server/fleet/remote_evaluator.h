// RemoteEvaluator: the CandidateEvaluator of a fleet. Build puts one build
// task per candidate on the Fleet's queue, Measure one measure task per
// request (the GPU model: the fleet's), each tagged with its job, and each
// waits for the results the workers report. A task whose worker dies is
// leased again by the queue, so the coordinator sees one result per task
// whatever happens to workers; while no worker able to take a task is live
// the call waits (fleet.worker_wait_seconds, Waiting() says so) instead of
// failing. The same JobService drives a local GPU or a fleet through this
// interface.
//
// The model measured on: fleet.gpu, else the model of the live GPU workers
// (the first registered), else that of the GPU worker heard from last, so a
// job keeps its model while its workers restart.
//
// Thread-safety: as CandidateEvaluator; Measure holds no state of its own, so
// MeasureSlots() calls (one per live GPU of the model) may run at once.
// REQUIRES: the Fleet outlives it.
#ifndef ANVIL_SERVER_FLEET_REMOTE_EVALUATOR_H_
#define ANVIL_SERVER_FLEET_REMOTE_EVALUATOR_H_

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "worker/candidate_evaluator.h"
#include "server/fleet/fleet.h"

namespace anvil {

struct RemoteEvaluatorOptions {
  // How long a task may take, queued and run, before the call gives up
  // (Unavailable; the task stays queued for a worker to take).
  absl::Duration task_timeout = absl::Minutes(30);
  double task_timeout_s = 300;  // the wall limit written into each task
  std::string gpu;              // the GPU model to measure on; "": the fleet's
};

class RemoteEvaluator final : public CandidateEvaluator {
 public:
  RemoteEvaluator(Fleet* fleet, RemoteEvaluatorOptions options)
      : fleet_(fleet), options_(std::move(options)) {}

  std::vector<absl::StatusOr<v1::Build>> Build(const std::vector<v1::Candidate>& candidates,
                                               const WorkContext& context) override;
  std::vector<absl::StatusOr<MeasureResult>> Measure(const std::vector<MeasureRequest>& requests,
                                                     const WorkContext& context) override;
  // The facts of the model's GPU (from a registered worker of it, live or
  // not); nullopt while no worker of it has ever registered.
  std::optional<v1::RunnerInfo> device() const override;
  // The live, unquarantined GPUs of the model measured on (at least one).
  int MeasureSlots() const override;
  void JobStarting(const std::string& job_id) override;
  void JobStopped(const std::string& job_id, bool ended) override;
  std::string Waiting() const override;

  // Whether a job for problems on `gpu` ("": any) can ever run here: OK, or
  // Unavailable naming why (no GPU worker ever registered and fleet.gpu not
  // set; another model than the fleet's).
  absl::Status CanRun(const std::string& gpu) const;
  // The GPU model measured on now ("": none known).
  std::string Model() const;

 private:
  Fleet* fleet_;
  const RemoteEvaluatorOptions options_;
};

}  // namespace anvil

#endif  // ANVIL_SERVER_FLEET_REMOTE_EVALUATOR_H_
