// Hardware-counter profile of one GEMM call through CUPTI's range profiler:
// where a kernel's time goes (tensor-pipe activity, L2 and DRAM traffic, SM
// throughput), the evidence for why a shape is below the vendor's speed. The
// call is replayed once per pass the metric set needs (user replay), after all
// timing is done; it never contributes a timing figure. Counters may be closed
// to non-admin users (NVreg_RestrictProfilingToAdminUsers): that is an error
// here, not a failure of the candidate. One profile at a time per process.
// Starting a range opens the driver's profiling interface for writing, which the
// runner's seccomp filter refuses: a runner asked to profile goes without it.
#ifndef ANVIL_WORKER_RUNNER_COUNTER_PROFILE_H_
#define ANVIL_WORKER_RUNNER_COUNTER_PROFILE_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace anvil::runner {

// The metrics the runner profiles (Nsight Compute names, Hopper):
// duration, SM and tensor-pipe utilisation, L2<->SM and DRAM bytes.
const std::vector<std::string>& ProfileMetrics();

struct CounterProfile {
  std::map<std::string, double> values;  // metric -> value, for the metrics the GPU has
  std::vector<std::string> unsupported;  // requested metrics this GPU does not have
  int passes = 0;                        // replays the metric set took
};

// Profiles `call` (one complete, synchronised GEMM call on the current device)
// for `metrics`, once per pass, each pass after `before` (outside the range:
// e.g. an L2 flush, so every pass starts from the same cache state). Metrics
// the chip does not know are skipped and listed.
absl::StatusOr<CounterProfile> ProfileCall(const std::vector<std::string>& metrics,
                                           const std::function<absl::Status()>& before,
                                           const std::function<absl::Status()>& call);

}  // namespace anvil::runner

#endif  // ANVIL_WORKER_RUNNER_COUNTER_PROFILE_H_
