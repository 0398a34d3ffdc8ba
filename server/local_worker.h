// LocalWorker: the worker pipeline in this process tree (local mode): build a
// candidate (sandboxed nvcc, cached), measure it on problems (sandboxed
// anvil-runner on this node's GPU), and record everything in the store.
// The fleet mode runs the same Builder and Evaluator behind the Fleet service.
// Thread-compatible: one caller at a time (one GPU slot), except that
// BuildAll may overlap Measure (KernelWorker).
#ifndef ANVIL_SERVER_LOCAL_WORKER_H_
#define ANVIL_SERVER_LOCAL_WORKER_H_

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "store/store.h"
#include "worker/builder.h"
#include "worker/evaluator.h"

namespace anvil {

struct LocalWorkerOptions {
  std::string cache_dir;           // build cache; empty: $ANVIL_CACHE or ~/.cache/anvil/builds
  int build_jobs = 2;              // parallel nvcc processes
  int device = 0;                  // CUDA ordinal
  v1::RunnerProtocol protocol;     // zero fields: runner defaults
  bool isolate = true;             // namespaces where the node allows
};

// The build cache: $ANVIL_CACHE, else the XDG cache folder's anvil/builds.
std::string DefaultBuildCacheDir();
// The Builder's and the worker Evaluator's options for local mode.
BuilderOptions MakeBuilderOptions(const Toolchain& toolchain, const LocalWorkerOptions& options);
EvaluatorOptions MakeEvaluatorOptions(const Toolchain& toolchain, const LocalWorkerOptions& options);

struct CandidateOutcome {
  v1::Build build;
  std::vector<v1::Measurement> measurements;  // [i] answers the i-th problem
  std::vector<int64_t> measurement_ids;       // store ids, when stored
};

// What a search needs from a worker: build, measure, and the device facts.
// LocalWorker is the real one; the fleet's remote worker is the next.
class KernelWorker {
 public:
  virtual ~KernelWorker() = default;
  // Builds candidates in parallel; results[i] answers candidates[i]. May run
  // on another thread while Measure runs (a search builds its next round
  // while the GPU measures this one); never two BuildAll or two Measure at once.
  virtual std::vector<absl::StatusOr<v1::Build>> BuildAll(
      const std::vector<v1::Candidate>& candidates) = 0;
  // Measures a built candidate on shapes of its layout (each in a fresh
  // runner process). Stores the candidate, build, measurements and tuned
  // cuBLASLt choices when `store` is given; a failed build is stored alone.
  virtual absl::StatusOr<CandidateOutcome> Measure(const v1::Candidate& candidate,
                                                   const v1::Build& build,
                                                   const std::vector<v1::Shape>& shapes,
                                                   Store* store,
                                                   const std::optional<std::string>& job_id) = 0;
  // The device facts, once a runner has started.
  virtual const std::optional<v1::RunnerInfo>& runner_info() const = 0;
};

class LocalWorker : public KernelWorker {
 public:
  static absl::StatusOr<std::unique_ptr<LocalWorker>> Create(LocalWorkerOptions options);

  std::vector<absl::StatusOr<v1::Build>> BuildAll(
      const std::vector<v1::Candidate>& candidates) override;
  absl::StatusOr<CandidateOutcome> Measure(const v1::Candidate& candidate, const v1::Build& build,
                                           const std::vector<v1::Shape>& shapes, Store* store,
                                           const std::optional<std::string>& job_id) override;
  const std::optional<v1::RunnerInfo>& runner_info() const override { return info_; }
  const Toolchain& toolchain() const { return toolchain_; }

 private:
  LocalWorker(Toolchain toolchain, LocalWorkerOptions options);
  // Adds the store's autotuned cuBLASLt choices for `shapes` (tuned by an
  // earlier run with this GPU and cuBLAS) to the ones the runner is given.
  void LoadLtAlgos(const std::vector<v1::Shape>& shapes, v1::Layout layout, Store* store);
  Toolchain toolchain_;
  Builder builder_;
  Evaluator evaluator_;
  std::vector<v1::LtAlgo> lt_algos_;
  std::set<std::string> lt_looked_up_;  // problems whose stored choice was looked up
  std::optional<v1::RunnerInfo> info_;
};

}  // namespace anvil

#endif  // ANVIL_SERVER_LOCAL_WORKER_H_
