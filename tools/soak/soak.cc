#include "tools/soak/soak.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "sandbox/sandbox.h"
#include "spdlog/spdlog.h"
#include "tools/soak/fixtures.h"
#include "tools/soak/gpu_memory.h"
#include "tools/soak/jobs.h"
#include "tools/soak/leaks.h"
#include "tools/soak/overhead.h"
#include "tools/soak/plan.h"

namespace anvil {
namespace {

struct JobResult {
  std::string kind;
  std::string expected;
  std::string got;
  bool ok = false;
  double wall_s = 0;
  std::string detail;
};

std::string Name(v1::Verdict v) { return v1::Verdict_Name(v).substr(sizeof("VERDICT_") - 1); }
std::string Outcome(const v1::Measurement& m) {
  return m.reason().empty() ? Name(m.verdict()) : absl::StrCat(Name(m.verdict()), " ", m.reason());
}
std::string Head(const std::string& s, size_t n) { return s.size() <= n ? s : s.substr(0, n) + "..."; }
double MiB(int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

std::string DescribeSandbox(const sandbox::Capabilities& c) {
  std::vector<std::string> on;
  if (c.namespaces) on.push_back("namespaces (" + c.bwrap_path + ")");
  if (c.cgroup_kill) on.push_back("job cgroups in " + c.cgroup_parent);
  if (c.cgroups) on.push_back("cgroup memory.max");
  std::string s = on.empty() ? "process sandbox only" : absl::StrJoin(on, ", ");
  if (!c.why_not.empty()) absl::StrAppend(&s, "; missing: ", c.why_not);
  return s;
}

class Soak {
 public:
  Soak(const SoakOptions& o, Toolchain t, SeedFamily naive, std::vector<Fixture> fixtures)
      : o_(o), toolchain_(std::move(t)), naive_(std::move(naive)), fixtures_(std::move(fixtures)),
        nonce_(absl::StrCat(getpid(), "-", absl::ToUnixMicros(absl::Now()))) {}

  absl::StatusOr<SoakReport> Run();

 private:
  absl::Status SetUp();
  absl::Status WarmUp();
  absl::Status TakeBaselines();
  void BuildLane();
  void GpuLane();
  JobResult BuildJob(int n);
  JobResult PassingJob(int n);
  JobResult HostileJob(const Fixture& f);
  std::optional<RunnerResults> EvaluateOne(const v1::Candidate& c, const v1::Build& b, const v1::Shape& shape,
                                        JobResult& r);
  void SettleMemory(const std::string& after, bool at_end);
  void FinishChecks();
  void Record(const JobResult& r);
  void Unexpected(std::string line);
  bool PastDeadline();

  const SoakOptions o_;
  const Toolchain toolchain_;
  const SeedFamily naive_;
  const std::vector<Fixture> fixtures_;
  const std::string nonce_;  // makes this run's build sources unique
  const absl::Time start_ = absl::Now();
  JobMix mix_;
  std::optional<sandbox::ScratchDir> root_;
  std::string jobs_dir_;  // parent of every build and run scratch directory
  std::string cache_dir_;
  std::unique_ptr<Builder> builder_;
  std::unique_ptr<RunnerHost> evaluator_;
  std::vector<v1::Candidate> passing_;
  std::vector<v1::Build> passing_builds_;
  std::atomic<int> next_build_{0};
  std::atomic<bool> stopped_{false};
  // The GPU lane's own state (one thread).
  std::vector<v1::LtAlgo> known_;
  std::optional<GpuMemory> memory_;
  std::optional<RecoverySample> pending_;  // a hang or crash waiting for the next PASSED
  absl::Time failed_end_;

  // Written by the calling thread only (set-up, GPU lane, final checks).
  SoakReport report_;
  // Shared with the build threads.
  absl::Mutex mu_;
  std::map<std::string, KindResult> kinds_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> unexpected_ ABSL_GUARDED_BY(mu_);
  int jobs_done_ ABSL_GUARDED_BY(mu_) = 0;
};

absl::StatusOr<SoakReport> Soak::Run() {
  mix_ = o_.cpu_only ? JobMix{o_.jobs, 0, 0} : SplitJobs(o_.jobs, o_.eval_share, o_.hostile_share);
  if (absl::Status s = SetUp(); !s.ok()) return s;
  RunnerHostOptions eval_none = SoakRunnerOptions(o_, toolchain_, jobs_dir_, false);
  if (evaluator_) eval_none.ceilings = evaluator_->ceilings();
  OverheadReport overhead =
      MeasureOverhead({o_.overhead_reps, toolchain_, naive_, nonce_, cache_dir_, jobs_dir_, eval_none,
                       evaluator_.get(), o_.cpu_only ? nullptr : &passing_[0],
                       o_.cpu_only ? nullptr : &passing_builds_[0], known_});
  if (absl::Status s = TakeBaselines(); !s.ok()) return s;
  const absl::Time soak_start = absl::Now();
  spdlog::info("soak: {} builds ({} at once), {} passing and {} hostile evaluations", mix_.builds,
               o_.build_jobs, mix_.evals, mix_.hostile);
  std::vector<std::thread> builders;
  for (int i = 0; i < std::min(o_.build_jobs, mix_.builds); ++i) builders.emplace_back([this] { BuildLane(); });
  if (!o_.cpu_only) GpuLane();
  for (std::thread& t : builders) t.join();
  report_.setup_s = absl::ToDoubleSeconds(soak_start - start_);
  report_.soak_s = SecondsSince(soak_start);
  report_.overhead = std::move(overhead);
  report_.stopped_early = stopped_;
  FinishChecks();
  absl::MutexLock lock(&mu_);  // the build threads are done; this is for the annotations
  report_.jobs_done = jobs_done_;
  report_.unexpected.insert(report_.unexpected.end(), unexpected_.begin(), unexpected_.end());
  for (auto& [name, k] : kinds_) report_.kinds.push_back(std::move(k));
  // Builds and passing evaluations first, then the fixtures by name.
  std::stable_sort(report_.kinds.begin(), report_.kinds.end(), [](const KindResult& a, const KindResult& b) {
    return (a.kind.find('/') != std::string::npos) < (b.kind.find('/') != std::string::npos);
  });
  return report_;
}

absl::Status Soak::SetUp() {
  const sandbox::Capabilities& caps = sandbox::Probe();
  absl::StatusOr<sandbox::ScratchDir> root = sandbox::ScratchDir::Create(o_.scratch_parent, "anvil-soak-");
  if (!root.ok()) return root.status();
  root_.emplace(std::move(*root));
  // Jobs run as an unprivileged uid that must reach their scratch directories and builds.
  jobs_dir_ = root_->path() + "/jobs";
  cache_dir_ = root_->path() + "/cache";
  for (const std::string& d : {root_->path(), jobs_dir_}) {
    if (mkdir(d.c_str(), 0755) != 0 && errno != EEXIST) return absl::InternalError("cannot create " + d);
    chmod(d.c_str(), 0755);
  }
  builder_ = std::make_unique<Builder>(SoakBuilderOptions(toolchain_, cache_dir_, jobs_dir_, o_.build_jobs, true));
  report_.cpu_only = o_.cpu_only;
  report_.sandbox = DescribeSandbox(caps);
  report_.mix = mix_;
  report_.build_jobs = o_.build_jobs;
  report_.startup_timeout_s = o_.startup_timeout_s;
  report_.problem_timeout_s = o_.problem_timeout_s;
  report_.leaks.scratch_dir = jobs_dir_;
  if (o_.cpu_only) return absl::OkStatus();
  // Every candidate the GPU lane needs, built once (later builds are cache hits).
  passing_ = PassingCandidates(naive_);
  std::vector<v1::Candidate> all = passing_;
  for (const Fixture& f : fixtures_) all.push_back(FixtureCandidate(f));
  std::vector<absl::StatusOr<v1::Build>> built = builder_->BuildAll(all);
  for (size_t i = 0; i < passing_.size(); ++i) {
    if (!built[i].ok()) return built[i].status();
    if (built[i]->verdict() != v1::VERDICT_PASSED) {
      return absl::FailedPreconditionError(
          absl::StrCat("the naive seed does not build (", passing_[i].name(), "): ", Head(built[i]->error(), 2000)));
    }
    passing_builds_.push_back(*built[i]);
  }
  spdlog::info("set-up: {} candidates built in {:.1f} s; sandbox: {}", all.size(), SecondsSince(start_),
               DescribeSandbox(caps));
  return WarmUp();
}

// One runner per layout on every passing problem, under generous limits:
// learns the ceilings and the cuBLASLt choices, so that the soak's own runners
// start quickly under short limits, and shows that a correct candidate passes
// before anything is judged.
absl::Status Soak::WarmUp() {
  SoakOptions generous = o_;
  generous.startup_timeout_s = 60;
  generous.problem_timeout_s = 30;
  RunnerHost warm(SoakRunnerOptions(generous, toolchain_, jobs_dir_, true));
  std::optional<v1::RunnerInfo> info;
  for (size_t i : {size_t{0}, passing_.size() / 2}) {  // one NT, one NN candidate
    absl::StatusOr<RunnerResults> ev = warm.Measure(passing_[i], passing_builds_[i], PassingShapes(), known_);
    if (!ev.ok()) return ev.status();
    for (const v1::Measurement& m : ev->measurements) {
      if (m.verdict() != v1::VERDICT_PASSED) {
        return absl::FailedPreconditionError(absl::StrCat("a correct candidate does not pass (", passing_[i].name(),
                                                          "): ", Outcome(m), ": ", m.detail()));
      }
    }
    known_.insert(known_.end(), ev->tuned.begin(), ev->tuned.end());
    info = ev->info;
    spdlog::info("warm-up: {} on {} problems in {:.2f} s", passing_[i].name(), ev->measurements.size(),
                 ev->seconds);
  }
  RunnerHostOptions e = SoakRunnerOptions(o_, toolchain_, jobs_dir_, true);
  e.ceilings = warm.ceilings();
  evaluator_ = std::make_unique<RunnerHost>(e);
  if (info) {
    report_.gpu = info->gpu();
    report_.gpu_uuid = info->gpu_uuid();
    report_.versions = info->versions();
  }
  return absl::OkStatus();
}

absl::Status Soak::TakeBaselines() {
  if (!o_.cpu_only) {
    absl::StatusOr<GpuMemory> m = GpuMemory::Open(o_.device, report_.gpu_uuid);
    if (!m.ok()) return m.status();
    memory_.emplace(std::move(*m));
    absl::StatusOr<int64_t> used = memory_->UsedBytes();
    if (!used.ok()) return used.status();
    report_.memory.source = memory_->source();
    report_.memory.slack_mib = o_.memory_slack_mib;
    report_.memory.before_mib = MiB(*used);
  }
  report_.leaks.fds_before = ListOpenFds("/proc/self/fd");
  report_.leaks.scratch_before = CountEntries(jobs_dir_);
  return absl::OkStatus();
}

bool Soak::PastDeadline() {
  if (o_.max_seconds > 0 && SecondsSince(start_) > o_.max_seconds) stopped_ = true;
  return stopped_;
}

void Soak::BuildLane() {
  for (int n = next_build_++; n < mix_.builds && !PastDeadline(); n = next_build_++) Record(BuildJob(n));
}

void Soak::GpuLane() {
  const std::vector<GpuJob> lane = PlanGpuLane(mix_.evals, mix_.hostile, HostileRound(fixtures_, o_.recovery_weight));
  for (const GpuJob& j : lane) {
    if (PastDeadline()) return;
    Record(j.hostile ? HostileJob(fixtures_[j.index]) : PassingJob(j.index));
  }
}

JobResult Soak::BuildJob(int n) {
  JobResult r{"build", "PASSED (fresh nvcc run)", "", false, 0, ""};
  const absl::Time t0 = absl::Now();
  absl::StatusOr<v1::Build> b = builder_->Build(FreshNaiveCandidate(naive_, n, nonce_));
  r.wall_s = SecondsSince(t0);
  if (!b.ok()) {
    r.got = "error";
    r.detail = b.status().ToString();
    return r;
  }
  r.got = absl::StrCat(Name(b->verdict()), b->cache_hit() ? " (cache hit)" : "");
  r.ok = b->verdict() == v1::VERDICT_PASSED && !b->cache_hit() && std::filesystem::exists(b->artifact());
  if (!r.ok) r.detail = Head(b->error(), 400);
  DropCacheEntry(*b);
  return r;
}

// Evaluates c on one problem, timing it into r (and, on an error of Anvil's
// own, saying so in r); keeps the new cuBLASLt choices.
std::optional<RunnerResults> Soak::EvaluateOne(const v1::Candidate& c, const v1::Build& b, const v1::Shape& shape,
                                            JobResult& r) {
  const absl::Time t0 = absl::Now();
  absl::StatusOr<RunnerResults> ev = evaluator_->Measure(c, b, {shape}, known_);
  r.wall_s += SecondsSince(t0);
  if (!ev.ok() || ev->measurements.empty()) {
    r.got = "error";
    r.detail = ev.ok() ? "no measurement" : ev.status().ToString();
    return std::nullopt;
  }
  known_.insert(known_.end(), ev->tuned.begin(), ev->tuned.end());
  r.got = Outcome(ev->measurements[0]);
  return *std::move(ev);
}

JobResult Soak::PassingJob(int n) {
  const size_t i = static_cast<size_t>(n) % passing_.size();
  const std::vector<v1::Shape> shapes = PassingShapes();
  JobResult r{"eval", "PASSED", "", false, 0, ""};
  const std::optional<RunnerResults> ev = EvaluateOne(
      passing_[i], passing_builds_[i], shapes[(static_cast<size_t>(n) / passing_.size()) % shapes.size()], r);
  if (!ev) return r;
  const v1::Measurement& m = ev->measurements[0];
  r.ok = m.verdict() == v1::VERDICT_PASSED;
  if (!r.ok) r.detail = absl::StrCat(passing_[i].name(), ": ", Head(m.detail(), 400));
  if (r.ok && pending_) {
    RecoverySample s = *pending_;
    s.total_s = SecondsSince(failed_end_);
    s.measurement_s = m.seconds();
    s.restart_s = s.total_s - s.measurement_s;
    s.startup_s = ev->info ? ev->info->startup_seconds() : 0;
    pending_.reset();
    report_.recovery.push_back(s);
  }
  return r;
}

JobResult Soak::HostileJob(const Fixture& f) {
  JobResult r{f.name, f.expect.policy_rejects ? "REJECTED (source policy)" : DescribeExpectation(f.expect),
              "", false, 0, ""};
  const absl::Time t0 = absl::Now();
  const v1::Candidate c = FixtureCandidate(f);
  absl::StatusOr<v1::Build> b = builder_->Build(c);  // a cache hit: built during set-up
  r.wall_s = SecondsSince(t0);
  if (!b.ok() || f.expect.policy_rejects || b->verdict() != v1::VERDICT_PASSED) {
    r.got = b.ok() ? Name(b->verdict()) : "error";
    r.ok = b.ok() && f.expect.policy_rejects && b->verdict() == v1::VERDICT_REJECTED;
    r.detail = b.ok() ? Head(b->error(), 400) : b.status().ToString();
    return r;
  }
  const std::optional<RunnerResults> ev = EvaluateOne(c, *b, FixtureShape(), r);
  if (!ev) return r;
  const v1::Measurement& m = ev->measurements[0];
  r.ok = MeetsExpectation(f.expect, m.verdict(), m.reason());
  r.detail = Head(m.detail(), 400);
  SettleMemory(f.name, false);
  const bool recovery = m.verdict() == v1::VERDICT_TIMEOUT || m.verdict() == v1::VERDICT_CRASHED;
  if (recovery && !pending_) {
    const double limit = o_.startup_timeout_s + o_.problem_timeout_s;
    RecoverySample s;
    s.after = f.name;
    s.verdict = Name(m.verdict());
    s.failed_s = ev->seconds;
    s.kill_s = m.verdict() == v1::VERDICT_TIMEOUT ? std::max(0.0, ev->seconds - limit) : 0;
    pending_ = s;
    failed_end_ = absl::Now();  // the memory sample above is ours, not the GPU's recovery
  }
  return r;
}

// Device memory must come back to where it was before the soak within
// memory_settle_s of a runner's end.
void Soak::SettleMemory(const std::string& after, bool at_end) {
  const double before = report_.memory.before_mib;
  const absl::Time t0 = absl::Now();
  double used = 0;
  for (;;) {
    absl::StatusOr<int64_t> bytes = memory_->UsedBytes();
    if (!bytes.ok()) return Unexpected(absl::StrCat("device memory after ", after, ": ", bytes.status().ToString()));
    used = MiB(*bytes);
    if (used - before <= o_.memory_slack_mib || SecondsSince(t0) >= o_.memory_settle_s) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  const double delta = used - before;
  if (delta > o_.memory_slack_mib) {
    Unexpected(absl::StrCat("device memory still ", delta, " MiB above its level ", o_.memory_settle_s,
                            " s after ", after));
  }
  if (at_end) {
    report_.memory.end_mib = used;
    return;
  }
  report_.memory.after_hostile_mib.push_back(delta);
  report_.memory.settle_s.push_back(SecondsSince(t0));
  if (delta > o_.memory_slack_mib) ++report_.memory.not_returned;
}

void Soak::FinishChecks() {
  if (memory_) SettleMemory("the last job", true);
  const std::optional<ProcessInfo> self = ReadProcess("/proc", getpid());
  LeftoverRules rules;
  rules.self_pid = getpid();
  rules.self_start_ticks = self ? self->start_ticks : 0;
  rules.scratch_root = root_->path();
  const Leftovers left = WaitForLeftovers("/proc", rules, 3);
  std::vector<std::string> ours, suspects;
  for (const ProcessInfo& p : left.ours) ours.push_back(DescribeProcess(p));
  for (const ProcessInfo& p : left.suspects) suspects.push_back(DescribeProcess(p));
  report_.leaks.processes = std::move(ours);
  report_.leaks.suspects = std::move(suspects);
  report_.leaks.fds_after = ListOpenFds("/proc/self/fd");
  report_.leaks.scratch_after = CountEntries(jobs_dir_);
  report_.leaks.cgroups = LeftoverJobCgroups(sandbox::Probe().cgroup_parent, getpid());
}

void Soak::Unexpected(std::string line) {
  spdlog::warn("{}", line);
  absl::MutexLock lock(&mu_);
  unexpected_.push_back(std::move(line));
}

void Soak::Record(const JobResult& r) {
  if (!r.ok) {
    Unexpected(absl::StrCat(r.kind, ": expected ", r.expected, ", got ", r.got,
                            r.detail.empty() ? "" : ": " + r.detail));
  }
  absl::MutexLock lock(&mu_);
  KindResult& k = kinds_[r.kind];
  k.kind = r.kind;
  k.expected = r.expected;
  ++k.jobs;
  k.as_expected += r.ok ? 1 : 0;
  k.wall_s.push_back(r.wall_s);
  ++k.observed[r.got];
  if (++jobs_done_ % 100 == 0) {
    spdlog::info("{}/{} jobs, {} not as expected, {:.0f} s", jobs_done_, o_.jobs, unexpected_.size(),
                 SecondsSince(start_));
  }
}

}  // namespace

absl::StatusOr<SoakReport> RunSoak(const SoakOptions& options) {
  SoakOptions o = options;
  if (o.scratch_parent.empty()) o.scratch_parent = DefaultScratchParent();
  absl::StatusOr<Toolchain> t = Toolchain::Find();
  if (!t.ok()) return t.status();
  absl::StatusOr<SeedFamily> naive =
      LoadNaiveSeed(o.seeds_dir.empty() ? DefaultSeedsDir(Toolchain::ExecutableDir()) : o.seeds_dir);
  if (!naive.ok()) return naive.status();
  std::vector<Fixture> fixtures;
  for (const char* folder : {"adversarial", "broken"}) {
    absl::StatusOr<std::vector<Fixture>> f = LoadFixtures(o.tests_dir, folder);
    if (!f.ok()) return f.status();
    fixtures.insert(fixtures.end(), f->begin(), f->end());
  }
  Soak soak(o, *t, *naive, std::move(fixtures));
  return soak.Run();
}

}  // namespace anvil
