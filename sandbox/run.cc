// Run: decides how a job is isolated, spawns it, supervises it and turns what
// happened into a Result. See sandbox.h.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "sandbox/cgroup.h"
#include "sandbox/internal.h"
#include "sandbox/spawn.h"
#include "sandbox/supervise.h"
#include "spdlog/spdlog.h"

namespace anvil::sandbox {
namespace internal {
namespace {

// How one job runs, decided before anything is started.
struct Plan {
  bool namespaces = false;
  int64_t uid = -1, gid = -1;  // switch to these (-1: keep the caller's)
  std::vector<std::string> command;
  std::vector<RlimitSetting> rlimits;
  std::vector<std::string> protections;
  std::string fallback;
};

absl::Status Validate(const Spec& spec) {
  if (spec.argv.empty() || spec.argv[0].empty() || spec.argv[0][0] != '/') {
    return absl::InvalidArgumentError("Spec.argv[0] must be an absolute path");
  }
  struct stat st;
  if (spec.work_dir.empty() || spec.work_dir[0] != '/' || stat(spec.work_dir.c_str(), &st) != 0 ||
      !S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Spec.work_dir must be an existing absolute directory: '", spec.work_dir, "'"));
  }
  for (const Bind& b : spec.binds) {
    if (b.source.empty() || b.source[0] != '/' || stat(b.source.c_str(), &st) != 0 ||
        (!b.target.empty() && b.target[0] != '/')) {
      return absl::InvalidArgumentError(absl::StrCat("bad bind '", b.source, "' -> '", b.target,
                                                     "': absolute, existing source required"));
    }
  }
  if (spec.limits.wall_time <= absl::ZeroDuration() || spec.limits.kill_grace < absl::ZeroDuration() ||
      spec.limits.output_cap_bytes < 0) {
    return absl::InvalidArgumentError("Spec.limits: wall_time > 0, kill_grace >= 0, cap >= 0");
  }
  return absl::OkStatus();
}

bool Searchable(const struct stat& st, int64_t uid, int64_t gid) {
  if (static_cast<int64_t>(st.st_uid) == uid) return st.st_mode & S_IXUSR;
  if (static_cast<int64_t>(st.st_gid) == gid) return st.st_mode & S_IXGRP;
  return st.st_mode & S_IXOTH;
}

// Every directory above path must be searchable by the job's uid.
absl::Status CheckReachable(const std::string& path, int64_t uid, int64_t gid) {
  for (size_t slash = path.find('/', 1); slash != std::string::npos;
       slash = path.find('/', slash + 1)) {
    const std::string dir = path.substr(0, slash);
    struct stat st;
    if (stat(dir.c_str(), &st) == 0 && !Searchable(st, uid, gid)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "'", path, "' is not reachable by the job's uid ", uid, ": '", dir,
          "' is not searchable (fix: `chmod o+x ", dir,
          "`, or move it to a directory every user can search, e.g. under /var/tmp or /opt)"));
    }
  }
  return absl::OkStatus();
}

absl::Status ChooseIds(const Spec& spec, Plan* plan) {
  const bool root = geteuid() == 0;
  plan->uid = spec.run_as_uid >= 0 ? spec.run_as_uid : root ? kNobody : -1;
  plan->gid = spec.run_as_gid >= 0 ? spec.run_as_gid : root ? kNobody : -1;
  if (plan->uid < 0 || plan->uid == static_cast<int64_t>(geteuid())) {
    plan->uid = -1;
    if (!root) plan->protections.push_back("unprivileged_uid");
    return absl::OkStatus();
  }
  plan->protections.push_back("unprivileged_uid");
  struct stat st;
  if (spec.work_dir == "/" || stat(spec.work_dir.c_str(), &st) != 0 ||
      (st.st_uid != geteuid() && static_cast<int64_t>(st.st_uid) != plan->uid)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "work_dir '", spec.work_dir, "' must be a scratch directory owned by the caller"));
  }
  if (chown(spec.work_dir.c_str(), static_cast<uid_t>(plan->uid),
            static_cast<gid_t>(plan->gid < 0 ? getegid() : plan->gid)) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot give work_dir to uid ", plan->uid, ": ", strerror(errno)));
  }
  std::vector<std::string> paths = {spec.work_dir};
  for (const Bind& b : spec.binds) paths.push_back(b.source);
  if (!plan->namespaces) paths.push_back(spec.argv[0]);
  for (const std::string& p : paths) {
    if (absl::Status s = CheckReachable(p, plan->uid, plan->gid); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status ChooseIsolation(const Spec& spec, const Capabilities& caps, Plan* plan) {
  if (spec.isolation == Isolation::kNone) return absl::OkStatus();
  if (caps.namespaces) {
    plan->namespaces = true;
    return absl::OkStatus();
  }
  if (spec.isolation == Isolation::kNamespaces) {
    return absl::FailedPreconditionError(
        absl::StrCat("namespace isolation is not available on this node: ", caps.why_not));
  }
  plan->fallback = caps.why_not.empty() ? "namespaces unavailable" : caps.why_not;
  return absl::OkStatus();
}

std::vector<RlimitSetting> Rlimits(const Limits& l, bool with_nproc) {
  std::vector<RlimitSetting> r = {{RLIMIT_CORE, 0, 0}};
  auto add = [&r](int resource, int64_t v, int64_t hard_extra) {
    if (v > 0) r.push_back({resource, uint64_t(v), uint64_t(v + hard_extra)});
  };
  add(RLIMIT_CPU, l.cpu_seconds, 1);  // SIGXCPU at the soft limit, SIGKILL one second later
  add(RLIMIT_FSIZE, l.file_size_bytes, 0);
  add(RLIMIT_NOFILE, l.open_files, 0);
  add(RLIMIT_AS, l.address_space_bytes, 0);
  if (with_nproc) add(RLIMIT_NPROC, l.processes, 0);
  return r;
}

// prlimit(1) arguments that set the same limits inside the namespaces.
std::vector<std::string> PrlimitPrefix(const std::string& prlimit, const Limits& l) {
  std::vector<std::string> a = {prlimit, "--core=0"};
  auto add = [&a](const char* flag, int64_t v, int64_t hard_extra) {
    if (v > 0) a.push_back(absl::StrCat(flag, v, ":", v + hard_extra));
  };
  add("--cpu=", l.cpu_seconds, 1);
  add("--fsize=", l.file_size_bytes, 0);
  add("--nofile=", l.open_files, 0);
  add("--as=", l.address_space_bytes, 0);
  add("--nproc=", l.processes, 0);
  return a;
}

void ChooseCommand(const Spec& spec, const Capabilities& caps, Plan* plan) {
  std::vector<std::string>& p = plan->protections;
  p.insert(p.end(), {"process_group", "rlimits", "env_scrubbed", "fds_closed", "die_with_parent"});
  if (!plan->namespaces) {
    plan->command = spec.argv;
    plan->rlimits = Rlimits(spec.limits, true);
    if (spec.limits.processes > 0) p.push_back("rlimit_nproc");
    return;
  }
  std::vector<std::string> inner = spec.argv;
  if (!caps.prlimit_path.empty()) {
    // Inside the user namespace RLIMIT_NPROC counts only the job's processes.
    std::vector<std::string> prefix = PrlimitPrefix(caps.prlimit_path, spec.limits);
    inner.insert(inner.begin(), prefix.begin(), prefix.end());
    plan->rlimits = {{RLIMIT_CORE, 0, 0}};
    if (spec.limits.processes > 0) p.push_back("rlimit_nproc");
  } else {
    plan->rlimits = Rlimits(spec.limits, false);  // no per-job NPROC without prlimit
  }
  plan->command = BwrapArgv(spec, caps, inner);
  p.insert(p.end(), {"user_ns", "mount_ns", "pid_ns", "ipc_ns", "uts_ns"});
  if (!spec.network) p.push_back("net_ns");
}

std::vector<std::string> BuildEnv(const Spec& spec) {
  std::vector<std::string> env = spec.env;
  for (const std::string& name : spec.env_passthrough) {
    if (const char* v = getenv(name.c_str()); v != nullptr) env.push_back(name + "=" + v);
  }
  return env;
}

// The three stdio pipes; whatever is still open is closed on destruction.
struct Pipes {
  int fds[6] = {-1, -1, -1, -1, -1, -1};  // stdin r/w, stdout r/w, stderr r/w
  ~Pipes() {
    for (int& fd : fds) Close(fd);
  }
  static void Close(int& fd) {
    if (fd >= 0) close(fd);
    fd = -1;
  }
  bool Open() {
    for (int i = 0; i < 3; ++i) {
      if (pipe2(fds + 2 * i, O_CLOEXEC) != 0) return false;
    }
    return fcntl(fds[1], F_SETFL, O_NONBLOCK) == 0;
  }
  void CloseChildEnds() {
    Close(fds[0]);
    Close(fds[3]);
    Close(fds[5]);
  }
  int Release(int i) {
    const int fd = fds[i];
    fds[i] = -1;
    return fd;
  }
};

std::unique_ptr<JobCgroup> MaybeCgroup(const Spec& spec, const Capabilities& caps, Plan* plan) {
  if (!caps.cgroup_kill) return nullptr;
  const int64_t memory = caps.cgroups ? spec.limits.memory_max_bytes : 0;
  absl::StatusOr<std::unique_ptr<JobCgroup>> cg = JobCgroup::Create(caps.cgroup_parent, memory);
  if (!cg.ok() && memory > 0) {
    spdlog::warn("sandbox: job runs without memory.max: {}", cg.status().ToString());
    cg = JobCgroup::Create(caps.cgroup_parent, 0);  // still tracked and killed as one
  }
  if (!cg.ok()) {
    spdlog::warn("sandbox: job runs without a cgroup: {}", cg.status().ToString());
    return nullptr;
  }
  plan->protections.push_back("cgroup");
  if ((*cg)->memory_limited()) plan->protections.push_back("cgroup_memory");
  return std::move(*cg);
}

Result MakeResult(const Supervised& s, const JobCgroup::Stats& stats, Plan* plan) {
  Result r;
  if (WIFEXITED(s.wait_status)) r.exit_code = WEXITSTATUS(s.wait_status);
  if (WIFSIGNALED(s.wait_status)) r.term_signal = WTERMSIG(s.wait_status);
  // bwrap reports a job killed by signal N as exit 128+N.
  if (plan->namespaces && r.exit_code > 128 && r.exit_code < 128 + 32) {
    r.term_signal = r.exit_code - 128;
    r.exit_code = -1;
  }
  r.timed_out = s.timed_out;
  r.output_capped = s.output_capped;
  r.cancelled = s.cancelled;
  r.time_limit_seconds = s.time_limit_seconds;
  r.stdout_text = s.out;
  r.stderr_text = s.err;
  r.stdout_truncated = s.out_truncated;
  r.stderr_truncated = s.err_truncated;
  r.wall_seconds = s.wall_seconds;
  const double rusage_cpu = static_cast<double>(s.usage.ru_utime.tv_sec + s.usage.ru_stime.tv_sec) +
                            static_cast<double>(s.usage.ru_utime.tv_usec + s.usage.ru_stime.tv_usec) / 1e6;
  r.cpu_seconds = std::max(rusage_cpu, stats.cpu_seconds);
  r.max_rss_bytes = std::max<int64_t>(int64_t(s.usage.ru_maxrss) * 1024, stats.peak_bytes);
  if (plan->namespaces) {  // rusage saw bwrap only (see Result.usage_known)
    r.usage_known = stats.cpu_known;
    r.cpu_seconds = stats.cpu_seconds;
    r.max_rss_bytes = stats.peak_bytes;
  }
  r.oom_killed = stats.oom_killed;
  r.protections = std::move(plan->protections);
  r.isolation_fallback = std::move(plan->fallback);
  return r;
}

absl::StatusOr<Plan> MakePlan(const Spec& spec, const Capabilities& caps) {
  Plan plan;
  if (absl::Status s = ChooseIsolation(spec, caps, &plan); !s.ok()) return s;
  if (absl::Status s = ChooseIds(spec, &plan); !s.ok()) return s;
  ChooseCommand(spec, caps, &plan);
  return plan;
}

Result ExecFailure(const Spec& spec, Plan* plan, int err) {
  Result r;
  r.exit_code = 127;
  r.stderr_text = absl::StrCat("anvil sandbox: cannot execute ", spec.argv[0], ": ", strerror(err), "\n");
  r.protections = std::move(plan->protections);
  r.isolation_fallback = std::move(plan->fallback);
  return r;
}

}  // namespace

// A job spawned and under watch; what Run and Session share.
struct Started {
  Plan plan;
  std::unique_ptr<JobCgroup> cgroup;
  std::unique_ptr<Supervisor> supervisor;
  std::optional<Result> failed;  // exec itself failed: the job's failure, nothing to watch
};

absl::StatusOr<Started> StartJob(const Spec& spec, const Capabilities& caps, bool keep_stdin_open) {
  if (absl::Status s = Validate(spec); !s.ok()) return s;
  absl::StatusOr<Plan> plan = MakePlan(spec, caps);
  if (!plan.ok()) return plan.status();
  Started job;
  job.plan = *std::move(plan);
  job.cgroup = MaybeCgroup(spec, caps, &job.plan);
  Pipes pipes;
  if (!pipes.Open()) return absl::ResourceExhaustedError(absl::StrCat("pipe: ", strerror(errno)));
  SpawnRequest req{job.plan.command, BuildEnv(spec), spec.work_dir, job.plan.rlimits,
                   pipes.fds[0], pipes.fds[3], pipes.fds[5],
                   job.cgroup ? job.cgroup->procs_fd() : -1, job.plan.uid, job.plan.gid};
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<Spawned> spawned = Spawn(req);
  pipes.CloseChildEnds();
  if (!spawned.ok()) return spawned.status();
  if (spawned->pid < 0) {
    job.failed = ExecFailure(spec, &job.plan, spawned->exec_errno);
    return job;
  }
  SuperviseRequest sr{spawned->pid, pipes.Release(1), pipes.Release(2), pipes.Release(4),
                      spec.stdin_data, keep_stdin_open, spec.limits.output_cap_bytes, start,
                      spec.limits.wall_time, spec.limits.kill_grace, job.cgroup.get(),
                      spec.limits.kill_at_output_cap, &spec.on_stdout, &spec.cancelled};
  job.supervisor = std::make_unique<Supervisor>(sr);
  return job;
}

// The job's end, reaped, as a Result.
absl::StatusOr<Result> EndJob(Started& job) {
  if (job.failed) return *job.failed;
  absl::StatusOr<Supervised> supervised = job.supervisor->Reap();
  job.supervisor.reset();
  const JobCgroup::Stats stats = job.cgroup ? job.cgroup->Finish() : JobCgroup::Stats();
  if (!supervised.ok()) return supervised.status();
  return MakeResult(*supervised, stats, &job.plan);
}

absl::StatusOr<Result> RunWith(const Spec& spec, const Capabilities& caps) {
  absl::StatusOr<Started> job = StartJob(spec, caps, /*keep_stdin_open=*/false);
  if (!job.ok()) return job.status();
  if (job->supervisor) job->supervisor->RunUntil(nullptr);
  return EndJob(*job);
}

}  // namespace internal

absl::StatusOr<Result> Run(const Spec& spec) { return internal::RunWith(spec, Probe()); }

struct Session::Job : internal::Started {};

absl::StatusOr<std::unique_ptr<Session>> Session::Start(const Spec& spec) {
  Spec quiet = spec;  // the exchanges bring input and callbacks
  quiet.stdin_data.clear();
  quiet.on_stdout = nullptr;
  quiet.cancelled = nullptr;
  absl::StatusOr<internal::Started> job = internal::StartJob(quiet, Probe(), /*keep_stdin_open=*/true);
  if (!job.ok()) return job.status();
  std::unique_ptr<Session> session(new Session());
  session->limits_ = spec.limits;
  session->job_ = std::make_unique<Job>();
  static_cast<internal::Started&>(*session->job_) = *std::move(job);
  if (internal::Supervisor* s = session->job_->supervisor.get()) {
    // Until the first exchange: the session's own (empty) callbacks, not
    // those of `quiet`, which is gone when this returns.
    s->Arm(std::chrono::steady_clock::now(), spec.limits.wall_time, "", &session->on_stdout_,
           &session->cancelled_);
  }
  return session;
}

Session::Session() = default;

Session::~Session() {
  if (job_ && !ended_) (void)internal::EndJob(*job_);
}

absl::StatusOr<bool> Session::Send(const Exchange& e) {
  if (ended_ || ended_by_itself_ || !job_->supervisor) return false;
  on_stdout_ = e.on_stdout;
  cancelled_ = e.cancelled;
  const absl::Duration wall = e.wall_time > absl::ZeroDuration() ? e.wall_time : limits_.wall_time;
  job_->supervisor->Arm(std::chrono::steady_clock::now(), wall, e.input, &on_stdout_, &cancelled_);
  if (job_->supervisor->RunUntil(e.answered)) {
    on_stdout_ = nullptr;  // the exchange's callbacks need not outlive it
    cancelled_ = nullptr;
    return true;
  }
  ended_by_itself_ = true;  // Finish drains the rest of its output through them
  return false;
}

absl::StatusOr<Result> Session::Finish() {
  if (ended_) return absl::FailedPreconditionError("the session has ended");
  ended_ = true;
  if (job_->supervisor && !ended_by_itself_) {
    // No more input: the job ends by itself within the grace, else is killed.
    on_stdout_ = nullptr;
    cancelled_ = nullptr;
    job_->supervisor->Arm(std::chrono::steady_clock::now(), limits_.kill_grace + absl::Seconds(10), "",
                          &on_stdout_, &cancelled_);
    job_->supervisor->EndInput();
    job_->supervisor->RunUntil(nullptr);
  }
  return internal::EndJob(*job_);
}

int64_t DefaultJobUid() { return geteuid() == 0 ? internal::kNobody : int64_t(geteuid()); }

absl::Status CheckReachableByJobs(const std::string& path) {
  const int64_t uid = DefaultJobUid();
  return internal::CheckReachable(path, uid, geteuid() == 0 ? internal::kNobody : int64_t(getegid()));
}

}  // namespace anvil::sandbox
