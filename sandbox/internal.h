// Internal pieces of the sandbox shared between its .cc files and its tests.
// Not a public API: the worker uses sandbox.h only.
//
// Thread-safety: every function here is safe to call from many threads.
#ifndef ANVIL_SANDBOX_INTERNAL_H_
#define ANVIL_SANDBOX_INTERNAL_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sandbox/sandbox.h"

namespace anvil::sandbox::internal {

// The uid/gid a job runs as when the caller is root and the Spec says -1.
inline constexpr int64_t kNobody = 65534;

struct ProbeOptions {
  std::string bwrap_path;        // empty: $ANVIL_SANDBOX_BWRAP, then the usual places
  bool skip_namespaces = false;  // as if bwrap were refused
  bool skip_cgroups = false;     // as if no cgroup were writable
};
// Probe() without the cache. Env: ANVIL_SANDBOX_BWRAP (bwrap to use),
// ANVIL_SANDBOX_NO_NAMESPACES=1, ANVIL_SANDBOX_NO_CGROUPS=1,
// ANVIL_SANDBOX_CGROUP (a delegated cgroup v2 directory for job cgroups).
Capabilities ProbeUncached(const ProbeOptions& options);

// Sets caps->bwrap_path (the caller's `given`, $ANVIL_SANDBOX_BWRAP, this
// program's bundle's, else the system's), bwrap_found_by and
// bwrap_disable_userns (it runs `bwrap --help`). Part of ProbeUncached.
void FindBwrap(const std::string& given, Capabilities* caps);

// Run() against explicit capabilities (tests force fallbacks with it).
absl::StatusOr<Result> RunWith(const Spec& spec, const Capabilities& caps);

// The bwrap command line that runs inner_argv for spec. The job's uid is the
// one bwrap starts with (Run drops root before exec'ing bwrap).
std::vector<std::string> BwrapArgv(const Spec& spec, const Capabilities& caps,
                                   const std::vector<std::string>& inner_argv);

// Directories holding the NVIDIA driver's libraries (libcuda.so.1 ...), from
// `ldconfig -p`, parsed once.
const std::vector<std::string>& DriverLibraryDirs();

// True if path is path_prefix or lies below it ("/usr/lib" is under "/usr").
bool PathIsUnder(const std::string& path, const std::string& path_prefix);

// What a failed namespace probe leaves to explain it (sandbox/diagnose.cc).
// GatherNamespaceFacts reads it from this process; tests fill it with
// recorded text.
struct NamespaceFacts {
  std::string bwrap_stderr;  // what the failed probe's bwrap printed
  std::string bwrap_path;
  std::string mountinfo;  // /proc/self/mountinfo
  std::string status;     // /proc/self/status ("Seccomp:\t2": a filter is installed)
  // Those of kernel.unprivileged_userns_clone, user.max_user_namespaces and
  // kernel.apparmor_restrict_unprivileged_userns this kernel has, by name.
  std::map<std::string, std::string> sysctls;
  bool systemd_service = false;  // systemd started this process as a service ($INVOCATION_ID)
  std::string systemd_unit;      // its unit, "anvil-worker.service", when the cgroup names it
  bool container = false;        // /.dockerenv, /run/.containerenv or $KUBERNETES_SERVICE_HOST
};
NamespaceFacts GatherNamespaceFacts(const std::string& bwrap_stderr, const std::string& bwrap_path);

// The setting that kept bubblewrap from its namespaces and the change that
// lifts it, e.g. "/proc is masked: /proc/sys, ... Fix: systemd: remove
// ProtectKernelTunables= ...". Empty when the facts match no known cause.
std::string DiagnoseNamespaces(const NamespaceFacts& facts);

// The mount points below a proc mount in mountinfo text: what hides or
// freezes part of /proc (binfmt_misc's, over a directory the kernel keeps
// empty, left out).
std::vector<std::string> ProcOvermounts(absl::string_view mountinfo);

// Signal name ("SIGSEGV"), or "signal N".
std::string SignalName(int sig);

}  // namespace anvil::sandbox::internal

#endif  // ANVIL_SANDBOX_INTERNAL_H_
