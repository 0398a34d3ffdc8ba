// sandbox: runs untrusted programs -- nvcc on candidate sources, and the
// runner that loads a candidate onto the GPU -- isolated, bounded, killable
// and observable. What each protection does and where it falls back:
// sandbox/SANDBOX.md.
//
// A job is one process tree started by Run() (or Session::Start, for a job
// that answers many requests). Its failure (non-zero exit,
// signal, timeout, output cap) is data in the Result; a non-OK status means
// the sandbox itself failed (bad Spec, fork failed, namespaces demanded but
// refused).
//
// Thread-safety: Run, Probe, CheckSource and ScratchDir are safe to call from
// many threads at once (the worker builds and runs in parallel). Run forks;
// between fork and exec the child only makes async-signal-safe calls.
// REQUIRES of the calling process: SIGCHLD is not ignored (SIG_IGN would reap
// our children behind our back) and nothing else calls waitpid(-1).
// InstallRunnerSeccomp changes the whole calling process, irreversibly.
#ifndef ANVIL_SANDBOX_SANDBOX_H_
#define ANVIL_SANDBOX_SANDBOX_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace anvil::sandbox {

struct Limits {
  absl::Duration wall_time = absl::Seconds(60);  // then SIGTERM to the whole process group...
  absl::Duration kill_grace = absl::Seconds(2);  // ...then SIGKILL after this grace
  int64_t cpu_seconds = 0;       // RLIMIT_CPU (SIGXCPU); 0 = unlimited (likewise below)
  int64_t file_size_bytes = 0;   // RLIMIT_FSIZE (SIGXFSZ)
  int64_t open_files = 0;        // RLIMIT_NOFILE
  // RLIMIT_NPROC counts every process of the job's uid. Under namespaces it is
  // set inside the job's own user namespace and counts only the job; without
  // them it counts every process of that uid on the host (other jobs too).
  int64_t processes = 0;
  int64_t address_space_bytes = 0;  // RLIMIT_AS: for nvcc only (it breaks CUDA processes)
  int64_t memory_max_bytes = 0;     // cgroup v2 memory.max, where the node allows cgroups
  int64_t output_cap_bytes = 1 << 20;  // per captured stream; the rest is discarded, flagged
  // A stream passing output_cap_bytes ends the job at once (SIGKILL to the
  // group; Result.output_capped), instead of discarding the rest: for jobs
  // whose flood is itself the failure (a device printf loop in a runner).
  bool kill_at_output_cap = false;
};

// A path made visible inside the namespace sandbox (ignored without namespaces).
struct Bind {
  std::string source;
  std::string target;  // empty = same as source
  bool writable = false;
};

enum class Isolation {
  kNone,        // process group, rlimits, scrubbed env, cgroup when available
  kNamespaces,  // kNone plus bubblewrap; Run fails (FailedPrecondition) if refused
  kAuto,        // namespaces if the node allows, else none (Result says so)
};

struct Spec {
  std::vector<std::string> argv;             // argv[0]: absolute path, visible inside
  std::vector<std::string> env;              // "KEY=VALUE": the child's whole environment...
  std::vector<std::string> env_passthrough;  // ...plus these names, copied when set here
  std::string stdin_data;
  std::string work_dir;    // existing scratch dir: the cwd and the only writable place
  std::vector<Bind> binds;  // extra paths visible inside (read-only unless writable)
  Limits limits;
  Isolation isolation = Isolation::kAuto;
  bool network = false;  // false: own network namespace (only its own loopback)
  bool gpu = false;      // make /dev/nvidia*, driver libraries, /proc/driver/nvidia, /sys visible
  // The uid/gid the job runs as. -1: 65534 (nobody) when the caller is root,
  // else the caller's own. A uid change chowns work_dir (not its contents) to
  // the job, and work_dir's parents must be searchable by it.
  int64_t run_as_uid = -1;
  int64_t run_as_gid = -1;
  // Called on Run's thread with each piece of stdout as it arrives (all of
  // it, also beyond the cap). It may return how much longer the job may run,
  // counted from now: the deadline becomes the earlier of that and
  // limits.wall_time from the start. The wall limit stays the upper bound, so
  // a job cannot buy itself time by printing; it can only shorten its run.
  std::function<std::optional<absl::Duration>(absl::string_view)> on_stdout;
  // Polled while the job runs (at least every 100 ms, on Run's thread): true
  // ends it at once (SIGKILL to the group and its cgroup; Result.cancelled),
  // for work no longer wanted (its job was cancelled). Empty: never.
  std::function<bool()> cancelled;
};

struct Result {
  int exit_code = -1;     // when exited normally
  int term_signal = 0;    // when killed by a signal
  bool timed_out = false;  // killed by us at its deadline (limits.wall_time or on_stdout's)
  double time_limit_seconds = 0;  // that deadline as it stood at the end (s from the start)
  bool output_capped = false;     // killed for passing output_cap_bytes (kill_at_output_cap)
  bool cancelled = false;         // killed because Spec.cancelled said so
  std::string stdout_text, stderr_text;
  bool stdout_truncated = false, stderr_truncated = false;
  double wall_seconds = 0, cpu_seconds = 0;  // cpu = user+sys of the whole job
  int64_t max_rss_bytes = 0;  // largest process (cgroup: whole job); 0 when unknown
  // False under namespaces without a job cgroup: bwrap does not reap its pid-1
  // helper, so the job's usage never reaches us; cpu_seconds is then 0.
  bool usage_known = true;
  bool oom_killed = false;  // cgroup memory.max hit (when cgroups active)
  // What was active, from: "process_group", "rlimits", "rlimit_nproc",
  // "env_scrubbed", "fds_closed", "die_with_parent", "unprivileged_uid",
  // "user_ns", "net_ns", "mount_ns", "pid_ns", "ipc_ns", "uts_ns",
  // "cgroup" (tracked and killed as one), "cgroup_memory".
  std::vector<std::string> protections;
  std::string isolation_fallback;  // kAuto ran without namespaces: why
  // One line: "exit 0 in 1.2 s" / "killed by SIGSEGV after 0.3 s" /
  // "timed out after 60 s", plus ", out of memory" and truncation notes.
  std::string Describe() const;
};

// Runs one job to completion (or to its limits) and reaps everything it
// started: no process of the job survives the return, timeouts included --
// except, without pid namespace and cgroup, processes that left the process
// group (setsid) on their own.
absl::StatusOr<Result> Run(const Spec& spec);

// A job that answers exchange after exchange: started once, then sent input
// and followed until its answer is complete, the way a process pool reuses
// its workers (the runner measures batch after batch in one process). Every
// protection of Run holds for the job's whole life; the limits hold per
// exchange (the wall time from the exchange's start, the output cap per
// stream per exchange). The Spec's stdin_data, on_stdout and cancelled are
// not used: each exchange brings its own.
// Thread-compatible: one caller at a time.
class Session {
 public:
  static absl::StatusOr<std::unique_ptr<Session>> Start(const Spec& spec);
  ~Session();  // a job still running is killed and reaped
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  struct Exchange {
    std::string input;  // for the job's stdin, which stays open
    // As Spec's, for this exchange.
    std::function<std::optional<absl::Duration>(absl::string_view)> on_stdout;
    std::function<bool()> cancelled;
    // Checked after each piece of output: the answer is complete.
    std::function<bool()> answered;
    absl::Duration wall_time = absl::ZeroDuration();  // zero: the Spec's
  };
  // True when `answered` said so while the job runs on (the exchange's
  // callbacks are then let go); false when the job ended first (it exited,
  // or was killed at its deadline, its output cap or a cancel): Finish()
  // then says how, and its last output still goes to this exchange's
  // callbacks, so call it while they are valid. Once false, always false.
  absl::StatusOr<bool> Send(const Exchange& exchange);
  // Closes stdin and lets a running job end by itself within the kill grace
  // plus 10 s (then kills it), and reaps it. Its Result is the last
  // exchange's (or the ending's) output, flags and wall time, with the job's
  // CPU, memory and protections. Once only.
  absl::StatusOr<Result> Finish();

 private:
  struct Job;
  Session();
  Limits limits_;
  std::unique_ptr<Job> job_;
  std::function<std::optional<absl::Duration>(absl::string_view)> on_stdout_;
  std::function<bool()> cancelled_;
  bool ended_ = false;            // Finish() was called
  bool ended_by_itself_ = false;  // the job ended during an exchange
};

// What this node supports, probed once (the first call runs bwrap and may take
// ~0.1 s) and cached; thread-safe.
struct Capabilities {
  bool namespaces = false;  // bwrap sandbox with user/net/mount/pid namespaces works
  bool cgroups = false;     // cgroup v2 memory.max can be set per job
  std::string bwrap_path;
  // Where bwrap_path came from: "ANVIL_SANDBOX_BWRAP", "bundle" (the bin/bwrap
  // of the bundle this program runs from), "system", or "caller" (tests).
  std::string bwrap_found_by;
  std::string why_not;      // what is missing and why, empty when everything works
  bool cgroup_kill = false;   // per-job cgroup (tracking and kill), even without memory
  std::string cgroup_parent;  // where job cgroups are created
  std::string prlimit_path;   // sets rlimits inside the namespaces (util-linux)
  bool bwrap_disable_userns = false;  // bwrap knows --disable-userns
};
const Capabilities& Probe();

// The uid jobs run as by default (Spec.run_as_uid = -1): 65534 when the
// caller is root, else the caller's own.
int64_t DefaultJobUid();
// OK when a job of DefaultJobUid() can reach `path`: every directory above it
// is searchable by that uid (a root caller's jobs run as 65534, so a path
// under a 0700 /root is not). FailedPrecondition names the directory and the
// fix otherwise. Checks the parents only, not `path` itself.
absl::Status CheckReachableByJobs(const std::string& path);

// A scratch directory removed on destruction, recursively and without
// following symlinks (read-only subdirectories included). Mode 0711: a job
// running as another uid (see Spec.run_as_uid) can reach a scratch directory
// nested inside, but cannot list it.
// Thread-compatible: one owner; movable, not copyable.
class ScratchDir {
 public:
  static absl::StatusOr<ScratchDir> Create(absl::string_view parent, absl::string_view prefix);
  ScratchDir(ScratchDir&& other) noexcept;
  ScratchDir& operator=(ScratchDir&& other) noexcept;
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  ~ScratchDir();

  const std::string& path() const { return path_; }
  // Removes the directory now; the destructor then does nothing.
  absl::Status Remove();

 private:
  explicit ScratchDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

// Source policy: a first filter before nvcc. Isolation is the real defence;
// SANDBOX.md lists what it catches and how it is evaded.
struct SourcePolicy {
  int64_t max_bytes = 256 * 1024;
  // Exact header names, or prefixes ending in '/'. Empty = the defaults:
  // CUDA toolkit headers, cute/, cutlass/ and OS-free standard headers
  // (DefaultAllowedIncludes()).
  std::vector<std::string> allowed_include_prefixes;
};
std::vector<std::string> DefaultAllowedIncludes();

struct PolicyViolation {
  // "size", "include", "directive", "pragma", "process", "dlopen", "socket",
  // "file_io", "environment", "thread", "syscall", "inline_asm_host".
  std::string rule;
  int line = 0;         // 1-based; 0 for the whole file
  std::string excerpt;  // the offending source line, trimmed
  // The reason, e.g. "line 12: #include <sys/socket.h> is not allowed: only
  // CUDA toolkit, CUTLASS/CuTe and OS-free standard headers are".
  std::string message;
};
// Empty vector = accepted. Non-OK only for an invalid policy.
absl::StatusOr<std::vector<PolicyViolation>> CheckSource(absl::string_view source,
                                                         const SourcePolicy& policy);

// Installed inside the runner after CUDA initialisation, on all its threads
// (TSYNC). Refuses with EPERM: sockets, fork/vfork/clone without CLONE_THREAD,
// execve/execveat, ptrace, process_vm_*, opening files for writing, changing
// the filesystem, namespaces/mounts, io_uring, bpf, kill/tgkill of other
// processes. clone3 gets ENOSYS so that glibc falls back to clone (threads
// stay allowed: the CUDA runtime and CUPTI create them; the runner counts
// host threads itself). Sets no_new_privs. Non-OK if the kernel refused.
absl::Status InstallRunnerSeccomp();
// The rules InstallRunnerSeccomp installs, one line each ("socket: EPERM").
std::vector<std::string> RunnerSeccompRules();

}  // namespace anvil::sandbox

#endif  // ANVIL_SANDBOX_SANDBOX_H_
