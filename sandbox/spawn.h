// Spawn: fork + exec of one job process with its pre-exec setup (new session,
// cgroup, stdio, cwd, rlimits, uid drop, parent-death signal, closing every
// other descriptor). Internal to the sandbox.
//
// Thread-safety: Spawn may be called from many threads at once. Everything the
// child needs is prepared before fork; between fork and exec the child makes
// only async-signal-safe system calls (no allocation, no locks).
#ifndef ANVIL_SANDBOX_SPAWN_H_
#define ANVIL_SANDBOX_SPAWN_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace anvil::sandbox::internal {

struct RlimitSetting {
  int resource = 0;
  uint64_t soft = 0;
  uint64_t hard = 0;
};

struct SpawnRequest {
  std::vector<std::string> argv;  // argv[0]: absolute path
  std::vector<std::string> env;   // the whole environment
  std::string cwd;
  std::vector<RlimitSetting> rlimits;
  int stdin_fd = -1, stdout_fd = -1, stderr_fd = -1;  // the child's ends
  int cgroup_procs_fd = -1;  // the job's cgroup.procs, written "0" by the child
  int64_t uid = -1, gid = -1;  // switch to these (-1: keep)
};

struct Spawned {
  pid_t pid = -1;      // the job; its pid is also its process group and session id
  int exec_errno = 0;  // exec itself failed (pid = -1, already reaped): the job's failure
};

// Starts the job. Non-OK when the sandbox could not set it up (fork, setsid,
// cgroup, rlimits, uid change...): the half-made child is reaped first.
absl::StatusOr<Spawned> Spawn(const SpawnRequest& request);

}  // namespace anvil::sandbox::internal

#endif  // ANVIL_SANDBOX_SPAWN_H_
