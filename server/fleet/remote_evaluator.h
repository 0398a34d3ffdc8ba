// RemoteEvaluator: the CandidateEvaluator of a fleet. Build puts one build
// task per candidate on the Fleet's queue, Measure one measure task per
// request (the GPU model: the fleet's), and each waits for the results the
// workers report. A task whose worker dies is leased again by the queue, so
// the coordinator sees one result per task whatever happens to workers. The
// same JobService drives a local GPU or a fleet through this interface.
//
// Thread-safety: as CandidateEvaluator; Measure holds no state of its own, so
// MeasureSlots() calls (one per live GPU of the model) may run at once.
// REQUIRES: the Fleet outlives it.
#ifndef ANVIL_SERVER_FLEET_REMOTE_EVALUATOR_H_
#define ANVIL_SERVER_FLEET_REMOTE_EVALUATOR_H_

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "server/evaluator.h"
#include "server/fleet/fleet.h"

namespace anvil {

struct RemoteEvaluatorOptions {
  // How long a task may wait for a worker and its result before the call
  // gives up (Unavailable; the task stays queued for a worker to take).
  absl::Duration task_timeout = absl::Minutes(30);
  double task_timeout_s = 300;  // the wall limit written into each task
  std::string gpu;              // the GPU model to measure on; "": the fleet's first
};

class RemoteEvaluator final : public CandidateEvaluator {
 public:
  RemoteEvaluator(Fleet* fleet, RemoteEvaluatorOptions options)
      : fleet_(fleet), options_(std::move(options)) {}

  std::vector<absl::StatusOr<v1::Build>> Build(const std::vector<v1::Candidate>& candidates) override;
  std::vector<absl::StatusOr<MeasureResult>> Measure(const std::vector<MeasureRequest>& requests) override;
  // The facts of the fleet's GPU model (from a registered worker); nullopt
  // while no GPU worker is alive.
  std::optional<v1::RunnerInfo> device() const override;
  // The live, unquarantined GPUs of the model measured on (at least one).
  int MeasureSlots() const override;

 private:
  // The model measured on: options.gpu, else the first live GPU's ("": none).
  std::string Gpu(const std::vector<v1::GpuInfo>& live) const;

  Fleet* fleet_;
  const RemoteEvaluatorOptions options_;
};

}  // namespace anvil

#endif  // ANVIL_SERVER_FLEET_REMOTE_EVALUATOR_H_
