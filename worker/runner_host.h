// RunnerHost: the host side of anvil-runner: measures a built candidate on
// problems by running the runner in the sandbox, one process per candidate (restarted after a crash, so the
// problems after it still get measured; after a hang or an output flood the
// rest are not run and say so, since each would cost its limit again). Time
// limits scale with the problem (runner_limits.h); each Measurement reports
// the ones it ran under. Every problem gets
// a Measurement: a runner that crashes, hangs or cheats yields one with the
// verdict and reason, never an error of the caller. Thread-safe for distinct GPUs; one
// Measure per GPU at a time.
#ifndef ANVIL_WORKER_RUNNER_HOST_H_
#define ANVIL_WORKER_RUNNER_HOST_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "anvil/v1/runner.pb.h"
#include "anvil/v1/types.pb.h"
#include "sandbox/sandbox.h"
#include "worker/runner_limits.h"
#include "worker/toolchain.h"

namespace anvil {

struct RunnerHostOptions {
  Toolchain toolchain;
  std::string scratch_dir = "/tmp";
  int device = 0;                                   // CUDA ordinal
  v1::RunnerProtocol protocol;                      // zero fields: runner defaults
  // Time and output limits of each runner, scaled with its measurements
  // (worker/runner_limits.h); the soak narrows them.
  RunnerLimits limits;
  sandbox::Isolation isolation = sandbox::Isolation::kNamespaces;  // as BuilderOptions
  bool seccomp = true;                              // runner filter after CUDA init
  int64_t memory_max_bytes = int64_t(32) << 30;     // host memory (cgroup) per runner
  std::optional<v1::Ceilings> ceilings;             // known: runners skip measuring them
};

struct RunnerResults {
  std::vector<v1::Measurement> measurements;  // [i] answers shapes[i]
  std::vector<v1::LtAlgo> tuned;              // new cuBLASLt choices to cache
  std::optional<v1::RunnerInfo> info;         // the last runner's device facts
  int runner_starts = 0;
  double seconds = 0;
};

// Puts a newly tuned choice in `algos`, in place of any earlier one for the same
// problem, cuBLAS version and figure (a runner uses the first that matches).
void MergeTunedAlgo(std::vector<v1::LtAlgo>& algos, v1::LtAlgo tuned);

class RunnerHost {
 public:
  explicit RunnerHost(RunnerHostOptions options)
      : ceilings_(options.ceilings), options_(std::move(options)) {}

  // REQUIRES: build.verdict() == PASSED. `known` are cached cuBLASLt choices
  // (those marked retune are tuned again, themselves among the contenders).
  // `cancelled` (empty: never) is polled before each runner and while one
  // runs: true kills the runner and the call answers Cancelled.
  absl::StatusOr<RunnerResults> Measure(const v1::Candidate& candidate, const v1::Build& build,
                                      const std::vector<v1::Shape>& shapes,
                                      const std::vector<v1::LtAlgo>& known,
                                      const std::function<bool()>& cancelled = nullptr);
  // Ceilings given in the options or learnt from the first runner, reused by later ones.
  std::optional<v1::Ceilings> ceilings() const;

 private:
  struct Attempt;
  absl::StatusOr<Attempt> RunOnce(const v1::RunnerRequest& request, const std::function<bool()>& cancelled);
  void Collect(const RunnerWatch& watch, Attempt* a);
  v1::Measurement StoppedRun(const v1::Candidate& c, const v1::Shape& shape, const Attempt& a) const;
  mutable absl::Mutex mu_;
  std::optional<v1::Ceilings> ceilings_ ABSL_GUARDED_BY(mu_);
  RunnerHostOptions options_;
};

}  // namespace anvil

#endif  // ANVIL_WORKER_RUNNER_HOST_H_
