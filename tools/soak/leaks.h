// What a soak may leave behind, read from a /proc-like tree given as
// `proc_root` (tests hand in a fake one): processes that outlived their jobs,
// open descriptors, entries in a directory, job cgroups. Reads only; safe to
// call from any thread.
#ifndef ANVIL_TOOLS_SOAK_LEAKS_H_
#define ANVIL_TOOLS_SOAK_LEAKS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace anvil {

struct ProcessInfo {
  int pid = 0;
  int ppid = 0;
  int64_t uid = -1;          // real uid ("Uid:" in status); -1 when unreadable
  char state = '?';          // 'R', 'S', 'Z', ...
  uint64_t start_ticks = 0;  // start time, clock ticks after boot (stat field 22)
  std::string comm;          // stat's (name)
  std::string cmdline;       // arguments joined by spaces
  std::string cwd;           // working directory; empty when unreadable
};

// nullopt when the process is gone or its stat cannot be parsed.
std::optional<ProcessInfo> ReadProcess(const std::string& proc_root, int pid);
// Every process under proc_root (those that vanish while listed are skipped).
std::vector<ProcessInfo> ListProcesses(const std::string& proc_root);

struct LeftoverRules {
  int self_pid = 0;
  uint64_t self_start_ticks = 0;
  // Names what is ours: every job's working directory lies under it.
  std::string scratch_root;
  int64_t sandbox_uid = 65534;  // jobs of a root caller run as this uid
  std::string runner_name = "anvil-runner";
};

struct Leftovers {
  // Ours: descendants of self_pid (zombies included), and processes started
  // after self whose working directory or command line names scratch_root
  // (a job reparented away from us when it left the tree).
  std::vector<ProcessInfo> ours;
  // Started after self, of sandbox_uid or named runner_name, but not ours by
  // the rules above: another user of the node, or a job that also moved its
  // working directory. Reported, not counted as leaks.
  std::vector<ProcessInfo> suspects;
};
Leftovers FindLeftovers(const std::vector<ProcessInfo>& all, const LeftoverRules& rules);

// FindLeftovers over proc_root, looking again for up to settle_s while any
// are found: a job's last process may be on its way out (bubblewrap's
// namespace init, for one, is reaped by the node's init, not by us).
Leftovers WaitForLeftovers(const std::string& proc_root, const LeftoverRules& rules, double settle_s);

// "1234 uid 65534 Z bwrap in /tmp/x: bwrap --args".
std::string DescribeProcess(const ProcessInfo& p);

// "12 -> /dev/nvidia0" for each open descriptor in `fd_dir` (e.g. /proc/self/fd),
// in descriptor order.
std::vector<std::string> ListOpenFds(const std::string& fd_dir);

// Entries of `dir` but "." and ".."; -1 when it cannot be read.
int CountEntries(const std::string& dir);

// Subdirectories of `cgroup_parent` named "anvil-<pid>-*": job cgroups of
// process `pid` that were not removed.
std::vector<std::string> LeftoverJobCgroups(const std::string& cgroup_parent, int pid);

}  // namespace anvil

#endif  // ANVIL_TOOLS_SOAK_LEAKS_H_
