// LocalEvaluator: the CandidateEvaluator of local mode: this node's Builder
// (sandboxed nvcc, cached by content) and the worker's RunnerHost (sandboxed
// anvil-runner on one GPU). It knows nothing of jobs or the store: the
// cuBLASLt choices it tunes are returned (MeasureResult::tuned) for the
// coordinator to store, and kept here for its later runners; stored choices
// come in with each request (MeasureRequest::known_lt_algos). The screens of
// one Measure call share a runner process; a full measurement or a re-check
// has its own.
// Thread-safety: as CandidateEvaluator (one Build and two Measure calls at
// once: the second waits for the GPU).
#ifndef ANVIL_WORKER_LOCAL_EVALUATOR_H_
#define ANVIL_WORKER_LOCAL_EVALUATOR_H_

#include <memory>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "worker/candidate_evaluator.h"
#include "worker/build_cache.h"
#include "worker/builder.h"
#include "worker/runner_host.h"

namespace anvil {

struct LocalEvaluatorOptions {
  std::string cache_dir;           // build cache; empty: DefaultBuildCacheDir()
  int build_jobs = 2;              // parallel nvcc processes
  int device = 0;                  // CUDA ordinal
  v1::RunnerProtocol protocol;     // zero fields: runner defaults
  // Untrusted builds and runs need namespace isolation: Create fails where
  // the node refuses it, unless this is set (--allow-no-isolation), in which
  // case they run with process-level protections only (sandbox/SANDBOX.md).
  bool allow_no_isolation = false;
};

// Whether this node can run untrusted work, checked before any is started:
// namespace isolation (or allow_no_isolation), and that the sandbox's uid can
// reach the runner, the CUTLASS headers, bubblewrap, the CUDA toolkit and the
// build cache (created here). FailedPrecondition says what and how to fix it.
// `cache_dir` empty: DefaultBuildCacheDir() (worker/build_cache.h).
absl::Status CheckNodeReady(const Toolchain& toolchain, const std::string& cache_dir,
                            bool allow_no_isolation);

class LocalEvaluator : public CandidateEvaluator {
 public:
  // Finds the toolchain (Unavailable without nvcc); fails (FailedPrecondition)
  // where CheckNodeReady does.
  static absl::StatusOr<std::unique_ptr<LocalEvaluator>> Create(LocalEvaluatorOptions options);

  std::vector<absl::StatusOr<v1::Build>> Build(const std::vector<v1::Candidate>& candidates,
                                               const WorkContext& context) override;
  std::vector<absl::StatusOr<MeasureResult>> Measure(const std::vector<MeasureRequest>& requests,
                                                     const WorkContext& context) override;
  std::optional<v1::RunnerInfo> device() const override;
  // Two: one call measures while the next waits for the GPU (candidate_evaluator.h).
  int MeasureSlots() const override { return 2; }
  int WaitingSlots() const override { return 1; }

 private:
  LocalEvaluator(Toolchain toolchain, const LocalEvaluatorOptions& options);
  // Requests of one fidelity and figure, in one RunnerHost::MeasureBatch.
  std::vector<absl::StatusOr<MeasureResult>> MeasureBatch(const std::vector<const MeasureRequest*>& requests,
                                                          const WorkContext& context)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(gpu_mu_);

  Builder builder_;
  RunnerHost runner_;
  // Held by a Measure call throughout: one runner on the GPU at a time, a
  // call's batches back to back.
  absl::Mutex gpu_mu_;
  std::vector<v1::LtAlgo> lt_algos_ ABSL_GUARDED_BY(gpu_mu_);
  mutable absl::Mutex mu_;
  std::optional<v1::RunnerInfo> info_ ABSL_GUARDED_BY(mu_);
};

}  // namespace anvil

#endif  // ANVIL_WORKER_LOCAL_EVALUATOR_H_
