// Internal pieces of the sandbox shared between its .cc files and its tests.
// Not a public API: the worker uses sandbox.h only.
//
// Thread-safety: every function here is safe to call from many threads.
#ifndef ANVIL_SANDBOX_INTERNAL_H_
#define ANVIL_SANDBOX_INTERNAL_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
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

// Signal name ("SIGSEGV"), or "signal N".
std::string SignalName(int sig);

}  // namespace anvil::sandbox::internal

#endif  // ANVIL_SANDBOX_INTERNAL_H_
