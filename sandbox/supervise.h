// Supervise: watches one spawned job until it ends. Feeds stdin, captures
// stdout and stderr concurrently (poll) up to a cap, enforces the wall-clock
// limit (SIGTERM to the process group, SIGKILL to the group and the job's
// cgroup after the grace), kills whatever the main process left behind when
// it exits, and reaps it. Internal to the sandbox.
//
// Thread-safety: one call per job; calls for different jobs may run in
// parallel. SIGPIPE is blocked in the calling thread while stdin is written.
#ifndef ANVIL_SANDBOX_SUPERVISE_H_
#define ANVIL_SANDBOX_SUPERVISE_H_

#include <sys/resource.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace anvil::sandbox::internal {

class JobCgroup;

struct SuperviseRequest {
  pid_t pid = -1;  // the job's main process; also its process group id
  // The parent's pipe ends, all closed by Supervise (-1 = none).
  int stdin_fd = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;
  absl::string_view stdin_data;
  int64_t output_cap = 0;  // per stream
  std::chrono::steady_clock::time_point start;
  absl::Duration wall_time;
  absl::Duration kill_grace;
  JobCgroup* cgroup = nullptr;  // killed with the group when present
  bool kill_at_output_cap = false;  // a stream over output_cap kills the job
  // Spec.on_stdout: may bring the deadline forward (never past wall_time).
  const std::function<std::optional<absl::Duration>(absl::string_view)>* on_stdout = nullptr;
  // Spec.cancelled: polled at least every kCancelPollMs; true kills the job.
  const std::function<bool()>* cancelled = nullptr;
};

constexpr int kCancelPollMs = 100;

struct Supervised {
  int wait_status = 0;
  struct rusage usage = {};
  bool timed_out = false;
  bool output_capped = false;
  bool cancelled = false;
  double time_limit_seconds = 0;  // the deadline at the end, from the start
  std::string out, err;
  bool out_truncated = false, err_truncated = false;
  double wall_seconds = 0;
};

// Returns when the main process has been reaped and its group and cgroup
// killed. Non-OK only if the sandbox lost track of the child (e.g. SIGCHLD
// ignored by the caller).
absl::StatusOr<Supervised> Supervise(const SuperviseRequest& request);

}  // namespace anvil::sandbox::internal

#endif  // ANVIL_SANDBOX_SUPERVISE_H_
