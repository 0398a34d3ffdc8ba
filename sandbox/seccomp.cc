// InstallRunnerSeccomp: the runner's system-call filter (libseccomp). The
// default is to allow: the CUDA driver needs ioctl, mmap, threads and more
// than we could list safely. What is refused, and why: SANDBOX.md
// ("Seccomp").
#include <fcntl.h>
#include <sched.h>
#include <seccomp.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "sandbox/sandbox.h"

namespace anvil::sandbox {
namespace {

// Refused outright with EPERM.
constexpr const char* kDenied[] = {
    // network
    "socket", "socketpair", "connect", "bind", "listen", "accept", "accept4",
    // new processes and programs (threads go through clone, see below)
    "fork", "vfork", "execve", "execveat",
    // other processes' memory
    "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_send_signal", "pidfd_getfd",
    // changing the filesystem (opening for writing is handled below)
    "creat", "openat2", "truncate", "unlink", "unlinkat", "rename", "renameat", "renameat2",
    "mkdir", "mkdirat", "rmdir", "link", "linkat", "symlink", "symlinkat", "mknod", "mknodat",
    "chmod", "fchmodat", "chown", "lchown", "fchownat",
    // namespaces, mounts, kernel attack surface, io_uring (its operations bypass seccomp)
    "unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "bpf", "userfaultfd",
    "keyctl", "add_key", "request_key", "kexec_load", "kexec_file_load", "init_module",
    "finit_module", "delete_module", "io_uring_setup", "io_uring_enter", "io_uring_register",
    "tkill"};

// Refused when one bit of the flags argument is set: opening for writing.
constexpr int kWriteFlags[] = {O_WRONLY, O_RDWR, O_CREAT, O_TRUNC};

// Signals may only go to this process itself (its threads included).
constexpr const char* kSelfOnly[] = {"kill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo"};

int Resolve(const char* name) { return seccomp_syscall_resolve_name(name); }

int AddRules(scmp_filter_ctx ctx) {
  int rc = 0;
  for (const char* name : kDenied) {
    const int nr = Resolve(name);
    if (nr == __NR_SCMP_ERROR) continue;  // not on this architecture
    if ((rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0)) != 0) return rc;
  }
  // clone without CLONE_THREAD starts a process; with it, a thread (allowed).
  rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), Resolve("clone"), 1,
                        SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0));
  if (rc != 0) return rc;
  // clone3 passes its flags in memory, which seccomp cannot read: ENOSYS makes
  // glibc fall back to clone for threads, where the rule above applies.
  if ((rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), Resolve("clone3"), 0)) != 0) return rc;
  const int open_nr = Resolve("open");  // absent on arm64, where libc uses openat
  for (int flag : kWriteFlags) {
    if (open_nr != __NR_SCMP_ERROR) {
      rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), open_nr, 1,
                            SCMP_A1(SCMP_CMP_MASKED_EQ, uint64_t(flag), uint64_t(flag)));
      if (rc != 0) return rc;
    }
    rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), Resolve("openat"), 1,
                          SCMP_A2(SCMP_CMP_MASKED_EQ, uint64_t(flag), uint64_t(flag)));
    if (rc != 0) return rc;
  }
  const uint64_t self = static_cast<uint64_t>(getpid());
  for (const char* name : kSelfOnly) {
    rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), Resolve(name), 1,
                          SCMP_A0(SCMP_CMP_NE, self));
    if (rc != 0) return rc;
  }
  return 0;
}

}  // namespace

absl::Status InstallRunnerSeccomp() {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (ctx == nullptr) return absl::InternalError("seccomp_init failed");
  // Other architectures' system calls (int 0x80 from a 64-bit process) kill.
  int rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
  if (rc == 0) rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 1);
  if (rc == 0) rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1);  // CUDA's threads too
  if (rc == 0) rc = AddRules(ctx);
  if (rc == 0) rc = seccomp_load(ctx);
  seccomp_release(ctx);
  if (rc != 0) {
    return absl::InternalError(absl::StrCat("installing the runner seccomp filter: ", strerror(-rc)));
  }
  return absl::OkStatus();
}

std::vector<std::string> RunnerSeccompRules() {
  std::vector<std::string> rules;
  for (const char* name : kDenied) rules.push_back(absl::StrCat(name, ": EPERM"));
  rules.push_back("clone without CLONE_THREAD: EPERM (threads allowed)");
  rules.push_back("clone3: ENOSYS (glibc falls back to clone)");
  rules.push_back("open/openat with O_WRONLY, O_RDWR, O_CREAT or O_TRUNC: EPERM");
  for (const char* name : kSelfOnly) rules.push_back(absl::StrCat(name, " to another process: EPERM"));
  rules.push_back("system calls of another architecture: process killed");
  return rules;
}

}  // namespace anvil::sandbox
