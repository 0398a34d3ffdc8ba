// ProcessState: the process-wide state one candidate can change for the next
// in a batch (RUNNER.md): host threads, the current device and context, the
// device's limits, cache and shared-memory configuration and flags, the
// runner stream's attributes, and the device memory in use. The batch runner takes it after start-up and
// again after each item whose next item is another candidate's; any
// difference ends the process (exit 5), so the items after it are measured
// in a fresh one and get the verdicts and figures they would get alone.
// CaptureProcessState needs the CUDA runtime (process_state_cuda.cc);
// DescribeChanges is pure. Not thread-safe.
#ifndef ANVIL_WORKER_RUNNER_PROCESS_STATE_H_
#define ANVIL_WORKER_RUNNER_PROCESS_STATE_H_

#include <cstdint>
#include <map>
#include <string>

#include <cuda_runtime.h>

#include "absl/status/statusor.h"

namespace anvil::runner {

struct ProcessState {
  // Each fact by name ("threads", "limit.stack_size", "stream.priority",
  // ...). A fact the device cannot report (a limit it does not support) is
  // absent; one present on one side only counts as a change.
  std::map<std::string, int64_t> values;
  int64_t free_device_bytes = 0;  // cudaMemGetInfo, after every session is destroyed
};

// Device memory in use may grow this much over a process's life without
// counting as a change. Kernels load on first use and keep their device
// memory for the process's life: each candidate library's, and the vendor
// kernels each new problem needs (baselines, the reference GEMM), so a
// process that measures many candidates on many problems grows steadily
// while nothing leaks; the driver's bookkeeping adds to it. What a
// candidate keeps itself is its own measurement's audit
// (RunnerProtocol.max_extra_device_bytes, memory_exceeded); this bound
// retires a process before such growth adds up to a hazard.
inline constexpr int64_t kMemoryToleranceBytes = int64_t(1) << 30;

// The state now, on the runner's stream. REQUIRES: no session alive (its
// buffers would count as memory in use), CUDA initialised on the device.
absl::StatusOr<ProcessState> CaptureProcessState(cudaStream_t stream);

// What changed from `before` to `after`, one clause per fact ("limit.stack_size
// 1024 -> 4096; device memory in use grew by 300 MiB"); "" when nothing did.
// Memory in use counts only when it grew by more than `memory_tolerance`.
std::string DescribeChanges(const ProcessState& before, const ProcessState& after,
                            int64_t memory_tolerance = kMemoryToleranceBytes);

}  // namespace anvil::runner

#endif  // ANVIL_WORKER_RUNNER_PROCESS_STATE_H_
