// JobCgroup: one cgroup v2 directory per job, under Capabilities.cgroup_parent.
// The child joins it before exec, so every process the job starts is in it,
// including those that leave the process group; Kill() ends them all
// (cgroup.kill, or SIGKILL per member on kernels before 5.14). With the memory
// controller, memory.max bounds the job and memory.events reports OOM kills.
// Internal to the sandbox.
//
// Thread-safety: one JobCgroup belongs to one Run call; different JobCgroups
// may be used from different threads.
#ifndef ANVIL_SANDBOX_CGROUP_H_
#define ANVIL_SANDBOX_CGROUP_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace anvil::sandbox::internal {

class JobCgroup {
 public:
  struct Stats {
    double cpu_seconds = 0;    // cpu.stat usage_usec of everything that ran in it
    bool cpu_known = false;    // cpu.stat was readable
    int64_t peak_bytes = 0;    // memory.peak (kernel 5.19+ with the memory controller)
    bool oom_killed = false;   // memory.events oom_kill > 0
  };

  // Creates <parent>/anvil-<pid>-<n>; memory_max > 0 sets memory.max (and
  // memory.swap.max = 0) and fails if that is impossible.
  static absl::StatusOr<std::unique_ptr<JobCgroup>> Create(const std::string& parent,
                                                           int64_t memory_max);
  ~JobCgroup();  // kills what is left and removes the directory
  JobCgroup(const JobCgroup&) = delete;
  JobCgroup& operator=(const JobCgroup&) = delete;

  int procs_fd() const { return procs_fd_; }  // cgroup.procs, open for writing
  bool memory_limited() const { return memory_limited_; }
  const std::string& path() const { return path_; }

  // SIGKILLs every process in the cgroup. Safe to call repeatedly.
  void Kill();
  // Kills what is left, waits (up to ~2 s) until the cgroup is empty and reads
  // its statistics. Call once, after the job's main process has been reaped.
  Stats Finish();

 private:
  JobCgroup(std::string path, int procs_fd, bool memory_limited)
      : path_(std::move(path)), procs_fd_(procs_fd), memory_limited_(memory_limited) {}
  bool WaitEmpty();

  std::string path_;
  int procs_fd_ = -1;
  bool memory_limited_ = false;
  bool removed_ = false;
};

// Reads a "key value" line from a flat-keyed cgroup file; -1 when absent.
int64_t ReadCgroupKey(const std::string& file, const std::string& key);

}  // namespace anvil::sandbox::internal

#endif  // ANVIL_SANDBOX_CGROUP_H_
