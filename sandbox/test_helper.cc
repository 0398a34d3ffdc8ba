// sandbox_test_helper: a small program the sandbox tests run inside the
// sandbox, to try what a hostile job would and print what happened, one
// "name=result" line per attempt (result: "ok" or the errno name).
//   seccomp            install the runner filter, then try each refused call
//   connect PORT       TCP connect to 127.0.0.1:PORT
//   fds                list open descriptors (besides the one listing them)
//   fork-many N        fork N children that sleep; report how many forks worked
//   open-many N        open /dev/null N times; report how many opens worked
//   run-candidate SO   dlopen SO, install the filter, call its anvil_hostile()
// and, for tests that reproduce a node's settings around it (deploy/):
//   probe              what the sandbox's probe finds here: namespaces, why_not
//   bwrap-argv DIR [gpu]  the bubblewrap command line of a job in DIR (a
//                      runner's, with the GPU's nodes, /sys and the driver, with
//                      "gpu"), one argument per line
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "sandbox/internal.h"
#include "sandbox/sandbox.h"

namespace {

void Report(const char* name, long rc, int err) {
  const char* what = rc >= 0 ? "ok" : strerrorname_np(err);
  std::printf("%s=%s\n", name, what != nullptr ? what : "?");
  std::fflush(stdout);
}

#define TRY(name, expr)          \
  do {                           \
    errno = 0;                   \
    const long rc_ = (expr);     \
    Report(name, rc_, errno);    \
  } while (0)

int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const int rc = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  const int err = errno;
  close(fd);
  errno = err;
  return rc;
}

long ForkChild() {
  const pid_t pid = fork();
  if (pid == 0) _exit(0);
  if (pid > 0) waitpid(pid, nullptr, 0);
  return pid;
}

long ExecTrue() {
  char* const argv[] = {const_cast<char*>("/bin/true"), nullptr};
  return execve("/bin/true", argv, environ);
}

long ThreadWorks() {
  bool ran = false;
  std::thread t([&ran] { ran = true; });
  t.join();
  return ran ? 0 : -1;
}

int Seccomp() {
  const absl::Status s = anvil::sandbox::InstallRunnerSeccomp();
  std::printf("install=%s\n", s.ok() ? "ok" : s.ToString().c_str());
  if (!s.ok()) return 1;
  TRY("socket", socket(AF_INET, SOCK_STREAM, 0));
  TRY("fork", ForkChild());
  TRY("execve", ExecTrue());
  TRY("open_write", open("helper-output", O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
  TRY("open_rdwr", open("/dev/null", O_RDWR | O_CLOEXEC));
  TRY("open_read", open("/proc/self/status", O_RDONLY | O_CLOEXEC));
  TRY("ptrace", ptrace(PTRACE_TRACEME, 0, nullptr, nullptr));
  TRY("unlink", unlink("helper-output"));
  TRY("mkdir", mkdir("helper-dir", 0755));
  TRY("kill_other", kill(1, 0));
  TRY("kill_self", kill(getpid(), 0));
  TRY("clone3", syscall(SYS_clone3, nullptr, 0));
  TRY("io_uring_setup", syscall(SYS_io_uring_setup, 1, nullptr));
  TRY("unshare", unshare(CLONE_NEWUSER));
  TRY("thread", ThreadWorks());
  return 0;
}

int ForkMany(int n) {
  int ok = 0, err = 0;
  for (int i = 0; i < n; ++i) {
    const pid_t pid = fork();
    if (pid == 0) {
      sleep(5);
      _exit(0);
    }
    if (pid < 0) {
      err = errno;
      break;
    }
    ++ok;
  }
  std::printf("forks=%d\nfork_error=%s\n", ok, err != 0 ? strerrorname_np(err) : "none");
  std::fflush(stdout);
  kill(0, SIGKILL);  // our whole process group, ourselves included
  return 0;
}

int OpenMany(int n) {
  int ok = 0, err = 0;
  for (int i = 0; i < n; ++i) {
    if (open("/dev/null", O_RDONLY) < 0) {
      err = errno;
      break;
    }
    ++ok;
  }
  std::printf("opens=%d\nopen_error=%s\n", ok, err != 0 ? strerrorname_np(err) : "none");
  return 0;
}

int ListFds() {
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return 1;
  while (struct dirent* e = readdir(d)) {
    if (e->d_name[0] != '.' && atoi(e->d_name) != dirfd(d)) std::printf("fd=%s\n", e->d_name);
  }
  closedir(d);
  return 0;
}

int RunCandidate(const char* so) {
  void* h = dlopen(so, RTLD_NOW);
  if (h == nullptr) {
    std::printf("dlopen=%s\n", dlerror());
    return 1;
  }
  auto fn = reinterpret_cast<int (*)()>(dlsym(h, "anvil_hostile"));
  if (fn == nullptr) return 1;
  const absl::Status s = anvil::sandbox::InstallRunnerSeccomp();
  std::printf("install=%s\n", s.ok() ? "ok" : s.ToString().c_str());
  std::fflush(stdout);
  return fn();
}

// The probe as the worker runs it, uncached and without logging, so stdout
// holds only these lines.
int PrintProbe() {
  const anvil::sandbox::Capabilities c = anvil::sandbox::internal::ProbeUncached({});
  std::printf("namespaces=%s\nbwrap=%s\nwhy_not=%s\n", c.namespaces ? "yes" : "no",
              c.bwrap_path.c_str(), c.why_not.c_str());
  return 0;
}

int PrintBwrapArgv(const char* dir, bool gpu) {
  anvil::sandbox::Capabilities caps;
  anvil::sandbox::internal::FindBwrap("", &caps);
  anvil::sandbox::Spec spec;
  spec.work_dir = dir;
  spec.gpu = gpu;
  for (const std::string& a : anvil::sandbox::internal::BwrapArgv(spec, caps, {"/usr/bin/true"})) {
    std::printf("%s\n", a.c_str());
  }
  return caps.bwrap_path.empty() ? 1 : 0;
}

}  // namespace

// Under -DANVIL_SANITIZE: LeakSanitizer's exit-time scan needs ptrace and spare
// descriptors, which this program deliberately gives up. Unused otherwise.
extern "C" int __lsan_is_turned_off() { return 1; }

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  const int arg = argc > 2 ? atoi(argv[2]) : 0;
  if (mode == "seccomp") return Seccomp();
  if (mode == "connect") {
    TRY("connect", Connect(arg));
    return 0;
  }
  if (mode == "fds") return ListFds();
  if (mode == "fork-many") return ForkMany(arg);
  if (mode == "open-many") return OpenMany(arg);
  if (mode == "run-candidate" && argc > 2) return RunCandidate(argv[2]);
  if (mode == "probe") return PrintProbe();
  if (mode == "bwrap-argv" && argc > 2) {
    return PrintBwrapArgv(argv[2], argc > 3 && std::string(argv[3]) == "gpu");
  }
  std::fprintf(stderr, "usage: %s seccomp|connect PORT|fds|fork-many N|open-many N|"
               "run-candidate SO|probe|bwrap-argv DIR [gpu]\n", argv[0]);
  return 2;
}
