// Supervisor: the poll loop of one job. See supervise.h.
#include "sandbox/supervise.h"

#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "sandbox/cgroup.h"
#include "spdlog/spdlog.h"

namespace anvil::sandbox::internal {
namespace {

using Clock = std::chrono::steady_clock;

int PidfdOpen(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
#else
  return -1;
#endif
}

int MillisUntil(Clock::time_point t) {
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(t - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(ms, 0, 1000));
}

}  // namespace

// Reads what is there; returns it (all of it, also beyond the cap); keeps
// the first `cap` bytes and counts the rest.
absl::string_view Supervisor::Capture::ReadSome(int64_t cap) {
  static thread_local char buf[65536];
  const ssize_t n = read(fd, buf, sizeof buf);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return {};
  if (n <= 0) {
    close(fd);
    fd = -1;
    return {};
  }
  const size_t room = cap > static_cast<int64_t>(text.size())
                          ? static_cast<size_t>(cap) - text.size() : 0;
  const size_t keep = std::min(room, static_cast<size_t>(n));
  text.append(buf, keep);
  if (keep < static_cast<size_t>(n)) truncated = true;
  return absl::string_view(buf, static_cast<size_t>(n));
}

Supervisor::Supervisor(const SuperviseRequest& r) : r_(r) {
  out_.fd = r.stdout_fd;
  err_.fd = r.stderr_fd;
  stdin_fd_ = r.stdin_fd;
  keep_stdin_open_ = r.keep_stdin_open;
  pidfd_ = PidfdOpen(r.pid);
  Arm(r.start, r.wall_time, std::string(r.stdin_data), r.on_stdout, r.cancelled);
}

Supervisor::~Supervisor() {
  CloseStdin();
  for (Capture* c : {&out_, &err_}) {
    if (c->fd >= 0) close(c->fd);
  }
  if (pidfd_ >= 0) close(pidfd_);
}

void Supervisor::Arm(Clock::time_point start, absl::Duration wall_time, std::string input,
                     const std::function<std::optional<absl::Duration>(absl::string_view)>* on_stdout,
                     const std::function<bool()>* cancelled) {
  r_.on_stdout = on_stdout;
  r_.cancelled = cancelled;
  start_ = start;
  pending_ = std::move(input);
  stdin_written_ = 0;
  if (pending_.empty() && !keep_stdin_open_) CloseStdin();
  for (Capture* c : {&out_, &err_}) {
    c->text.clear();
    c->truncated = false;
  }
  timed_out_ = output_capped_ = cancelled_ = false;
  limit_at_ = start + absl::ToChronoNanoseconds(wall_time);
  SetDeadline(limit_at_);
}

void Supervisor::EndInput() {
  keep_stdin_open_ = false;
  if (stdin_written_ == pending_.size()) CloseStdin();
}

void Supervisor::CloseStdin() {
  if (stdin_fd_ >= 0) close(stdin_fd_);
  stdin_fd_ = -1;
}

// The deadline moves while the job runs (0 phase only), never past limit_at_.
void Supervisor::SetDeadline(Clock::time_point t) {
  if (phase_ != 0) return;
  term_at_ = std::min(t, limit_at_);
  kill_at_ = term_at_ + absl::ToChronoNanoseconds(r_.kill_grace);
}

void Supervisor::OnStdout(absl::string_view chunk) {
  if (chunk.empty() || r_.on_stdout == nullptr || !*r_.on_stdout) return;
  if (std::optional<absl::Duration> left = (*r_.on_stdout)(chunk)) {
    SetDeadline(Clock::now() + absl::ToChronoNanoseconds(std::max(*left, absl::ZeroDuration())));
  }
}

// kill_at_output_cap: a stream over the cap ends the job now.
void Supervisor::CheckCap() {
  if (!r_.kill_at_output_cap || output_capped_ || !(out_.truncated || err_.truncated)) return;
  output_capped_ = true;
  KillEverything();
  phase_ = 2;
}

// Spec.cancelled: the work is no longer wanted; kill it now.
void Supervisor::CheckCancelled() {
  if (phase_ == 2 || r_.cancelled == nullptr || !*r_.cancelled || !(*r_.cancelled)()) return;
  cancelled_ = true;
  KillEverything();
  phase_ = 2;
}

void Supervisor::KillEverything() {
  kill(-r_.pid, SIGKILL);
  if (r_.cgroup != nullptr) r_.cgroup->Kill();
}

bool Supervisor::MainExited() {
  siginfo_t info;
  memset(&info, 0, sizeof info);
  // WNOWAIT: the zombie keeps the pid and process group id reserved until we
  // have killed the rest of the group, so kill(-pgid) cannot hit a reused id.
  if (waitid(P_PID, static_cast<id_t>(r_.pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
    return errno != EINTR;  // ECHILD: nothing left to wait for
  }
  return info.si_pid != 0;
}

void Supervisor::Escalate() {
  const Clock::time_point now = Clock::now();
  if (phase_ == 0 && now >= term_at_) {
    timed_out_ = true;
    kill(-r_.pid, SIGTERM);
    phase_ = 1;
  }
  if (phase_ == 1 && now >= kill_at_) {
    KillEverything();
    phase_ = 2;
  }
}

void Supervisor::WriteStdin() {
  sigset_t pipe_set, old;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
  const size_t left = pending_.size() - stdin_written_;
  const ssize_t n = write(stdin_fd_, pending_.data() + stdin_written_, std::min<size_t>(left, 65536));
  const int err = errno;
  if (n < 0 && err == EPIPE) {
    struct timespec zero = {0, 0};
    sigtimedwait(&pipe_set, nullptr, &zero);  // consume our SIGPIPE
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (n > 0) stdin_written_ += static_cast<size_t>(n);
  if (n < 0 && err != EINTR && err != EAGAIN) {
    CloseStdin();  // the reader is gone
  } else if (stdin_written_ == pending_.size() && !keep_stdin_open_) {
    CloseStdin();
  }
}

void Supervisor::PollOnce(int timeout_ms) {
  struct pollfd fds[4];
  int n = 0;
  for (Capture* c : {&out_, &err_}) {
    if (c->fd >= 0) fds[n++] = {c->fd, POLLIN, 0};
  }
  const bool to_write = stdin_fd_ >= 0 && stdin_written_ < pending_.size();
  if (to_write) fds[n++] = {stdin_fd_, POLLOUT, 0};
  if (pidfd_ >= 0) fds[n++] = {pidfd_, POLLIN, 0};
  if (poll(fds, static_cast<nfds_t>(n), timeout_ms) <= 0) return;
  for (int i = 0; i < n; ++i) {
    if (fds[i].revents == 0) continue;
    if (fds[i].fd == out_.fd) OnStdout(out_.ReadSome(r_.output_cap));
    else if (fds[i].fd == err_.fd) err_.ReadSome(r_.output_cap);
    else if (to_write && fds[i].fd == stdin_fd_ && (fds[i].revents & POLLOUT)) WriteStdin();
    else if (to_write && fds[i].fd == stdin_fd_) CloseStdin();  // POLLERR: the reader is gone
  }
}

bool Supervisor::RunUntil(const std::function<bool()>& answered) {
  Clock::time_point last_warning = Clock::now();
  while (!MainExited()) {
    if (answered && phase_ == 0 && answered()) return true;
    Escalate();
    const Clock::time_point next = phase_ == 0 ? term_at_ : phase_ == 1 ? kill_at_
                                                                        : Clock::now() + std::chrono::seconds(1);
    int timeout = pidfd_ >= 0 ? MillisUntil(next) : std::min(MillisUntil(next), 10);
    if (r_.cancelled != nullptr && *r_.cancelled) timeout = std::min(timeout, kCancelPollMs);
    PollOnce(timeout);
    CheckCap();
    CheckCancelled();
    if (phase_ == 2 && Clock::now() - last_warning > std::chrono::seconds(10)) {
      last_warning = Clock::now();
      spdlog::warn("sandbox: pid {} survives SIGKILL (uninterruptible sleep?); waiting", r_.pid);
    }
  }
  return false;
}

absl::StatusOr<Supervised> Supervisor::Reap() {
  KillEverything();  // what the main process left behind, or the whole job
  CloseStdin();
  const Clock::time_point drain_until = Clock::now() + std::chrono::seconds(1);
  while ((out_.fd >= 0 || err_.fd >= 0) && Clock::now() < drain_until) {
    PollOnce(MillisUntil(drain_until));
  }
  Supervised s;
  pid_t got;
  while ((got = wait4(r_.pid, &s.wait_status, 0, &s.usage)) < 0 && errno == EINTR) {
  }
  if (got != r_.pid) {
    return absl::InternalError(absl::StrCat("lost track of job pid ", r_.pid, ": ",
                                            strerror(errno), " (is SIGCHLD ignored?)"));
  }
  s.wall_seconds = std::chrono::duration<double>(Clock::now() - start_).count();
  s.timed_out = timed_out_;
  s.output_capped = output_capped_;
  s.cancelled = cancelled_;
  s.time_limit_seconds = std::chrono::duration<double>(term_at_ - start_).count();
  s.out = std::move(out_.text);
  s.err = std::move(err_.text);
  s.out_truncated = out_.truncated;
  s.err_truncated = err_.truncated;
  return s;
}

}  // namespace anvil::sandbox::internal
