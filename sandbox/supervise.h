// Supervisor: watches one spawned job until it ends. Feeds stdin, captures
// stdout and stderr concurrently (poll) up to a cap, enforces the wall-clock
// limit (SIGTERM to the process group, SIGKILL to the group and the job's
// cgroup after the grace), kills whatever the main process left behind when
// it exits, and reaps it, a step at a time, so that a job can also answer
// exchange after exchange (Session, sandbox.h): each exchange feeds stdin,
// re-arms the limit and resets the captured output. Internal to the sandbox.
//
// Thread-safety: one caller per job; different jobs may be watched in
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
  // The parent's pipe ends, all closed by the Supervisor (-1 = none).
  int stdin_fd = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;
  absl::string_view stdin_data;
  bool keep_stdin_open = false;  // stdin stays open once written (a Session's)
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

// Watches one job a step at a time (Run: RunUntil(nullptr), then Reap).
// Owns the request's pipe ends.
class Supervisor {
 public:
  using Clock = std::chrono::steady_clock;
  explicit Supervisor(const SuperviseRequest& request);
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // A new exchange from `start`: the limit, callbacks and output capture
  // start again (the pointers must outlive the exchange); `input` is queued
  // for stdin.
  void Arm(Clock::time_point start, absl::Duration wall_time, std::string input,
           const std::function<std::optional<absl::Duration>(absl::string_view)>* on_stdout,
           const std::function<bool()>* cancelled);
  // Watches the job until `answered` (checked after each poll) says true --
  // true -- or the main process ends -- false.
  bool RunUntil(const std::function<bool()>& answered);
  // No more input: stdin is closed once what is queued is written.
  void EndInput();
  // Kills what is left of the job, reaps it and says what happened in the
  // last exchange. Non-OK only if the sandbox lost track of the child (e.g.
  // SIGCHLD ignored by the caller).
  absl::StatusOr<Supervised> Reap();

 private:
  bool MainExited();
  void Escalate();
  void PollOnce(int timeout_ms);
  void WriteStdin();
  void CloseStdin();
  void SetDeadline(Clock::time_point t);
  void OnStdout(absl::string_view chunk);
  void CheckCap();
  void CheckCancelled();
  void KillEverything();

  struct Capture {
    int fd = -1;
    std::string text;
    bool truncated = false;
    absl::string_view ReadSome(int64_t cap);
  };
  SuperviseRequest r_;
  Capture out_, err_;
  int stdin_fd_ = -1;
  std::string pending_;  // queued for stdin
  size_t stdin_written_ = 0;
  bool keep_stdin_open_ = false;
  int pidfd_ = -1;
  Clock::time_point start_, limit_at_, term_at_, kill_at_;
  int phase_ = 0;  // 0 running, 1 SIGTERM sent, 2 SIGKILL sent
  bool timed_out_ = false;
  bool output_capped_ = false;
  bool cancelled_ = false;
};

}  // namespace anvil::sandbox::internal

#endif  // ANVIL_SANDBOX_SUPERVISE_H_
