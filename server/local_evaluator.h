// LocalEvaluator: the CandidateEvaluator of local mode: this node's Builder
// (sandboxed nvcc, cached by content) and the worker's Evaluator (sandboxed
// anvil-runner on one GPU). It knows nothing of jobs or the store: the
// cuBLASLt choices it tunes are returned (MeasureResult::tuned) for the
// coordinator to store, and kept here for its later runners; stored choices
// come in with each request (MeasureRequest::known_lt_algos).
// Thread-safety: as CandidateEvaluator (one Build and one Measure at once).
#ifndef ANVIL_SERVER_LOCAL_EVALUATOR_H_
#define ANVIL_SERVER_LOCAL_EVALUATOR_H_

#include <memory>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/evaluator.h"
#include "server/local_worker.h"
#include "worker/builder.h"
#include "worker/evaluator.h"

namespace anvil {

class LocalEvaluator : public CandidateEvaluator {
 public:
  // Finds the toolchain; options as LocalWorker's.
  static absl::StatusOr<std::unique_ptr<LocalEvaluator>> Create(LocalWorkerOptions options);

  std::vector<absl::StatusOr<v1::Build>> Build(const std::vector<v1::Candidate>& candidates) override;
  std::vector<absl::StatusOr<MeasureResult>> Measure(const std::vector<MeasureRequest>& requests) override;
  std::optional<v1::RunnerInfo> device() const override;

 private:
  LocalEvaluator(Toolchain toolchain, const LocalWorkerOptions& options);
  absl::StatusOr<MeasureResult> MeasureOne(const MeasureRequest& request);

  Builder builder_;
  Evaluator evaluator_;
  std::vector<v1::LtAlgo> lt_algos_;  // Measure's thread only
  mutable absl::Mutex mu_;
  std::optional<v1::RunnerInfo> info_ ABSL_GUARDED_BY(mu_);
};

}  // namespace anvil

#endif  // ANVIL_SERVER_LOCAL_EVALUATOR_H_
