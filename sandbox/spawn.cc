// Spawn: fork + exec with the pre-exec setup. See spawn.h.
#include "sandbox/spawn.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

namespace anvil::sandbox::internal {
namespace {

enum Stage : int {
  kSetsid = 1,
  kCgroup,
  kStdio,
  kChdir,
  kRlimit,
  kGroups,
  kGid,
  kUid,
  kDeathSignal,
  kCloseFds,
  kExec,
};

const char* StageName(int stage) {
  static const char* const kNames[] = {"?",         "setsid", "cgroup attach", "stdio",
                                       "chdir",     "setrlimit", "setgroups", "setresgid",
                                       "setresuid", "parent-death signal", "closing fds", "exec"};
  return stage > 0 && stage <= kExec ? kNames[stage] : "?";
}

struct ChildError {
  int stage = 0;
  int err = 0;
};

// Everything the child touches, built before fork (no allocation after it).
struct Prepared {
  std::vector<char*> argv;
  std::vector<char*> env;
  pid_t parent = 0;
  int max_fd = 0;
};

Prepared Prepare(const SpawnRequest& r) {
  Prepared p;
  for (const std::string& a : r.argv) p.argv.push_back(const_cast<char*>(a.c_str()));
  p.argv.push_back(nullptr);
  for (const std::string& e : r.env) p.env.push_back(const_cast<char*>(e.c_str()));
  p.env.push_back(nullptr);
  p.parent = getpid();
  long max_fd = sysconf(_SC_OPEN_MAX);
  p.max_fd = max_fd > 0 && max_fd < (1 << 20) ? static_cast<int>(max_fd) : (1 << 20);
  return p;
}

[[noreturn]] void Fail(int error_fd, int stage) {
  ChildError e{stage, errno};
  ssize_t unused = write(error_fd, &e, sizeof e);
  (void)unused;
  _exit(126);
}

void ResetSignals() {
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  for (int s = 1; s < NSIG; ++s) sigaction(s, &dfl, nullptr);  // KILL/STOP fail: harmless
}

// Moves the three pipe ends onto 0/1/2, safe even if one of them is 0, 1 or 2.
bool SetupStdio(const SpawnRequest& r) {
  const int from[3] = {r.stdin_fd, r.stdout_fd, r.stderr_fd};
  int high[3];
  for (int i = 0; i < 3; ++i) {
    high[i] = fcntl(from[i], F_DUPFD_CLOEXEC, 10);
    if (high[i] < 0) return false;
  }
  for (int i = 0; i < 3; ++i) {
    if (dup2(high[i], i) != i) return false;  // dup2 clears close-on-exec on i
  }
  return true;
}

bool DropIds(const SpawnRequest& r, int error_fd) {
  if (r.gid >= 0) {
    if (syscall(SYS_setgroups, 0, nullptr) != 0) Fail(error_fd, kGroups);
    if (syscall(SYS_setresgid, r.gid, r.gid, r.gid) != 0) Fail(error_fd, kGid);
  }
  if (r.uid >= 0 && syscall(SYS_setresuid, r.uid, r.uid, r.uid) != 0) Fail(error_fd, kUid);
  return true;
}

void CloseOtherFds(int max_fd, int error_fd) {
  // Mark every fd >= 3 close-on-exec (error_fd already is); fall back to
  // closing them one by one on kernels before 5.11.
  if (syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) == 0) return;
  for (int fd = 3; fd < max_fd; ++fd) {
    if (fd != error_fd) close(fd);
  }
}

[[noreturn]] void ChildMain(const SpawnRequest& r, const Prepared& p, int error_fd) {
  ResetSignals();
  if (setsid() < 0) Fail(error_fd, kSetsid);
  if (r.cgroup_procs_fd >= 0 && write(r.cgroup_procs_fd, "0", 1) != 1) Fail(error_fd, kCgroup);
  if (!SetupStdio(r)) Fail(error_fd, kStdio);
  if (chdir(r.cwd.c_str()) != 0) Fail(error_fd, kChdir);
  for (const RlimitSetting& rl : r.rlimits) {
    struct rlimit lim = {rl.soft, rl.hard};
    if (setrlimit(static_cast<__rlimit_resource>(rl.resource), &lim) != 0) Fail(error_fd, kRlimit);
  }
  DropIds(r, error_fd);
  // After the uid change: changing credentials clears the parent-death signal.
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) Fail(error_fd, kDeathSignal);
  if (getppid() != p.parent) _exit(126);  // the caller is already gone
  CloseOtherFds(p.max_fd, error_fd);
  execve(p.argv[0], p.argv.data(), p.env.data());
  Fail(error_fd, kExec);
}

ssize_t ReadFull(int fd, void* buf, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = read(fd, static_cast<char*>(buf) + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  return static_cast<ssize_t>(got);
}

void ReapQuietly(pid_t pid) {
  while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace

absl::StatusOr<Spawned> Spawn(const SpawnRequest& request) {
  if (request.argv.empty()) return absl::InvalidArgumentError("empty argv");
  Prepared prepared = Prepare(request);
  int error_pipe[2];
  if (pipe2(error_pipe, O_CLOEXEC) != 0) {
    return absl::ResourceExhaustedError(absl::StrCat("pipe: ", strerror(errno)));
  }
  const pid_t pid = fork();
  if (pid < 0) {
    const int err = errno;
    close(error_pipe[0]);
    close(error_pipe[1]);
    return absl::ResourceExhaustedError(absl::StrCat("fork: ", strerror(err)));
  }
  if (pid == 0) ChildMain(request, prepared, error_pipe[1]);
  close(error_pipe[1]);
  ChildError e;
  const ssize_t n = ReadFull(error_pipe[0], &e, sizeof e);
  close(error_pipe[0]);
  if (n == 0) return Spawned{pid, 0};  // exec succeeded: the pipe closed on exec
  ReapQuietly(pid);
  if (n == static_cast<ssize_t>(sizeof e) && e.stage == kExec) return Spawned{-1, e.err};
  if (n != static_cast<ssize_t>(sizeof e)) {
    return absl::InternalError("sandbox child exited before exec without a report");
  }
  return absl::InternalError(absl::StrCat("sandbox child setup failed at ", StageName(e.stage),
                                          ": ", strerror(e.err)));
}

}  // namespace anvil::sandbox::internal
