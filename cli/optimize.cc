// anvil optimize: search kernels for problems on this node and store the
// winners (local mode: the coordinator's JobService in-process, with the
// embedded proposer and this node's LocalEvaluator). The job's event stream
// feeds the progress display (cli/progress.h): live on a terminal, plain lines
// elsewhere. An interrupted or budget-limited run resumes from the store when
// run again.
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "cli/cli.h"
#include "cli/progress.h"
#include "proto/problem.h"
#include "reward/reward.h"
#include "seeds/seeds.h"
#include "server/job_service.h"
#include "server/local_evaluator.h"
#include "server/proposers/embedded/search.h"
#include "server/proposers/factory.h"
#include "store/writer_lock.h"
#include "prompts/prompts.h"

namespace anvil::cli {
namespace {

absl::StatusOr<std::vector<ShapeSpec>> Problems(const OptimizeArgs& a) {
  std::vector<ShapeSpec> specs;
  if (!a.shapes_file.empty()) {
    std::ifstream in(a.shapes_file);
    if (!in) return absl::NotFoundError("cannot read shapes file " + a.shapes_file);
    std::stringstream ss;
    ss << in.rdbuf();
    absl::StatusOr<std::vector<ShapeSpec>> f = ParseShapesFile(ss.str());
    if (!f.ok()) return absl::InvalidArgumentError(absl::StrCat(a.shapes_file, ": ", f.status().message()));
    specs = *f;
  }
  absl::StatusOr<v1::Layout> layout = ParseLayout(a.layout);
  if (!layout.ok()) return layout.status();
  for (const std::string& s : a.shapes) {
    absl::StatusOr<v1::Shape> shape = ParseShape(s);
    if (!shape.ok()) return shape.status();
    specs.push_back({*shape, *layout});
  }
  if (specs.empty()) {  // the embedded default: a few development shapes
    absl::StatusOr<std::vector<ShapeSpec>> d = ParseShapesFile(
        "4096 4096 4096 nt\n16 4096 4096 nt\n1000 1000 1000 nt\n512 2048 512 nn\n");
    specs = *d;
  }
  return specs;
}

absl::Status WriteCurve(const std::string& path, const std::string& figure,
                        const std::vector<CurvePoint>& curve) {
  std::ofstream out(path);
  out << "problem,candidates_tried,best_speedup_" << figure << ",seconds,stage\n";
  for (const CurvePoint& c : curve) {
    out << absl::StrFormat("%s,%d,%.4f,%.1f,%s\n", c.problem, c.tried, c.speedup, c.seconds, c.stage);
  }
  out.close();
  if (!out) return absl::ResourceExhaustedError("cannot write the search curve to " + path);
  return absl::OkStatus();
}

// The prompts beside the executable (bundle), else ANVIL_PROMPTS_DIR or the source tree's.
std::string PromptsDir() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return DefaultPromptsDir(ec ? "." : exe.parent_path().string());
}

// The in-process coordinator of local mode: the embedded proposer, this
// node's evaluator, the store; `result` receives the search's own summary.
absl::StatusOr<std::unique_ptr<JobService>> LocalJobService(
    Store& store, CandidateEvaluator& evaluator, const std::vector<SeedFamily>& seeds,
    const OptimizeArgs& a, int build_jobs, std::shared_ptr<std::optional<SearchResult>> result) {
  JobServiceOptions o;
  o.store = &store;
  o.evaluator = &evaluator;
  o.default_figure = a.figure;
  o.build_chunk = std::max(8, 2 * build_jobs);
  ProposerSetupOptions p;
  p.store = &store;
  p.seeds = seeds;
  p.llm_config = a.llm_config;
  p.prompts_dir = PromptsDir();
  p.build_chunk = o.build_chunk;
  p.seeds_only = a.seeds_only;
  p.transfer_from = a.transfer_from;
  p.progress = [](const std::string& line) { std::cout << "  " << line << "\n" << std::flush; };
  p.on_done = [result](const absl::StatusOr<SearchResult>& r) {
    if (r.ok()) *result = *r;
  };
  ProposerSet set = MakeProposerSet(std::move(p));
  o.proposers = std::move(set.factory);
  o.share_policy = std::move(set.share_policy);
  return JobService::Create(std::move(o));
}

// The embedded search's own lines as display events (it prints its new bests
// and failed builds itself; the job's events carry the totals).
ProgressEvent::Kind KindOfSearchLine(const std::string& line) {
  if (absl::StrContains(line, " did not build")) return ProgressEvent::Kind::kBuildFailed;
  if (absl::StrContains(line, "x -> ")) return ProgressEvent::Kind::kNewBest;
  return ProgressEvent::Kind::kLog;
}

// Feeds the display from the job's event stream (JobService::WatchJob), with
// the lines the proposers write to stdout drawn above the live block, and on
// a terminal a tick a second that moves the clock between events.
class LocalProgress {
 public:
  explicit LocalProgress(DisplayOptions options)
      : terminal_(std::cout.rdbuf()), display_(terminal_, options) {
    lines_.emplace([this](const std::string& line) { OnLine(line); });
    if (options.live) ticker_ = std::thread([this] {
      while (!done_.WaitForNotificationWithTimeout(absl::Seconds(1))) Tick();
    });
  }
  ~LocalProgress() { Stop(); }
  void Stop() {
    if (!done_.HasBeenNotified()) done_.Notify();
    if (ticker_.joinable()) ticker_.join();
    lines_.reset();  // stdout is stdout again
    display_.Finish();
  }
  void OnEvent(const JobEvent& event) {
    ProgressEvent e = FromJobEvent(event);
    const bool own_line = event.proposer == "embedded" && (event.kind == JobEventKind::kNewBest ||
                                                           event.kind == JobEventKind::kBuildFailed);
    if (own_line) e.kind = ProgressEvent::Kind::kTick;
    {
      absl::MutexLock lock(&mu_);
      if (event.usage.by_proposer.empty()) KeepTotals(e);
      last_ = e;
      last_at_ = absl::Now();
    }
    display_.Handle(e);
  }

 private:
  // A state change from the service itself carries the stored job, not the
  // run's usage: the totals seen so far stay on screen.
  void KeepTotals(ProgressEvent& e) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    e.builds = last_.builds;
    e.build_failures = last_.build_failures;
    e.measurements = last_.measurements;
    if (e.elapsed_s == 0) e.elapsed_s = last_.elapsed_s;
    if (e.problems_measured == 0 && last_.problems_measured > 0) {
      e.problems_measured = last_.problems_measured;
      e.best = last_.best;
    }
  }
  void OnLine(const std::string& line) { Send(KindOfSearchLine(line), line); }
  void Tick() { Send(ProgressEvent::Kind::kTick, ""); }
  void Send(ProgressEvent::Kind kind, const std::string& line) {
    ProgressEvent e;
    {
      absl::MutexLock lock(&mu_);
      e = last_;
      if (e.state == "running") e.elapsed_s += absl::ToDoubleSeconds(absl::Now() - last_at_);
    }
    e.kind = kind;
    e.message = line;
    display_.Handle(e);
  }

  std::ostream terminal_;  // the real stdout
  ProgressDisplay display_;
  absl::Mutex mu_;
  ProgressEvent last_ ABSL_GUARDED_BY(mu_);
  absl::Time last_at_ ABSL_GUARDED_BY(mu_) = absl::Now();
  std::optional<StdoutLines> lines_;
  absl::Notification done_;
  std::thread ticker_;
};

}  // namespace

absl::StatusOr<v1::OptimizeKernelRequest> OptimizeRequest(const OptimizeArgs& a) {
  absl::StatusOr<std::vector<ShapeSpec>> problems = Problems(a);
  if (!problems.ok()) return problems.status();
  if (!IsFigure(a.figure)) return absl::InvalidArgumentError("--figure must be one of " + FigureList());
  v1::OptimizeKernelRequest req;
  req.set_proposer("embedded");
  req.set_reward_figure(a.figure);
  req.mutable_budget()->set_max_wall_seconds(a.budget_minutes * 60);
  req.set_request_id(a.request_id);
  for (const ShapeSpec& s : *problems) {
    v1::Problem* p = req.add_problems();
    *p->mutable_shape() = s.shape;
    p->set_layout(s.layout);
    p->set_dtype(v1::DTYPE_F16_F32ACC);
    p->set_gpu(a.gpu);  // empty: the evaluator's
  }
  return req;
}

int RunOptimize(const Globals& g, const OptimizeArgs& a) {
  absl::StatusOr<std::vector<ShapeSpec>> problems = Problems(a);
  if (!problems.ok()) return Report(problems.status(), kUsage);
  if (!IsFigure(a.figure)) {
    return Report(absl::InvalidArgumentError("--figure must be one of " + FigureList()), kUsage);
  }
  absl::StatusOr<WriterLock> writer = WriterLock::Acquire(g.db, "anvil optimize");
  if (!writer.ok()) return Report(writer.status(), kDatabase);
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(g.db);
  if (!store.ok()) return Report(store.status(), kDatabase);
  std::string why;
  if (CountGpus(&why) == 0) {
    std::cerr << "anvil optimize: " << problems->size() << " problems, store " << g.db
              << " ready, but nothing can be measured here: " << why << ".\n"
              << NoGpuAdvice() << "\n";
    return kUnavailable;
  }
  LocalEvaluatorOptions wo;
  wo.allow_no_isolation = g.allow_no_isolation;
  wo.build_jobs = a.build_jobs > 0 ? a.build_jobs : DefaultBuildJobs();
  absl::StatusOr<std::unique_ptr<LocalEvaluator>> evaluator = LocalEvaluator::Create(wo);
  if (!evaluator.ok()) return Report(evaluator.status(), kUnavailable);
  absl::StatusOr<std::vector<SeedFamily>> seeds = LoadSeeds(DefaultSeedsDir(Toolchain::ExecutableDir()));
  if (!seeds.ok()) return Report(seeds.status(), kFailed);
  auto result = std::make_shared<std::optional<SearchResult>>();
  absl::StatusOr<std::unique_ptr<JobService>> service =
      LocalJobService(**store, **evaluator, *seeds, a, wo.build_jobs, result);
  if (!service.ok()) return Report(service.status(), kFailed);
  absl::StatusOr<v1::OptimizeKernelRequest> req = OptimizeRequest(a);
  if (!req.ok()) return Report(req.status(), kUsage);
  absl::StatusOr<v1::Job> job = (*service)->CreateJob(*req);
  if (!job.ok()) return Report(job.status(), kDatabase);
  if (!a.quiet) {
    std::cout << absl::StrFormat(
        "anvil optimize: job %s, %d problems, embedded proposer, %d seed families, budget %.0f min, "
        "%d nvcc jobs\n",
        job->id(), problems->size(), seeds->size(), a.budget_minutes, wo.build_jobs);
  }
  LocalProgress progress(StdoutDisplayOptions(a.quiet, a.verbose));
  absl::StatusOr<std::unique_ptr<Watch>> watch =
      (*service)->WatchJob(job->id(), [&progress](const JobEvent& e) { progress.OnEvent(e); });
  absl::StatusOr<v1::Job> done = (*service)->RunJob(job->id());
  if (watch.ok()) watch->reset();
  progress.Stop();
  if (!done.ok()) return Report(done.status(), kFailed);
  if (done->state() != v1::JOB_STATE_SUCCEEDED || !result->has_value()) {
    return Report(absl::InternalError(done->error().empty() ? "the search did not finish" : done->error()), kFailed);
  }
  const SearchResult* r = &**result;
  if (!a.curve_file.empty()) {
    if (absl::Status st = WriteCurve(a.curve_file, a.figure, r->curve); !st.ok()) return Report(st, kFailed);
  }
  const double minutes = std::max(r->wall_seconds, 1.0) / 60;
  std::cout << absl::StrFormat(
      "done in %.1f min%s: %d candidates built (%d failed; %.1f/min), %d measurements (%.1f/min; "
      "%.0f s building and measuring, %.0f s on the GPU)\n"
      "best verified per problem (%s time):\n",
      minutes, r->budget_exhausted ? " (budget spent: rerun to resume)" : "", r->candidates_built,
      r->build_failures, r->candidates_built / minutes, r->measurements, r->measurements / minutes,
      r->measure_seconds, done->gpu_seconds(), a.figure);
  double log_sum = 0;
  int n = 0;
  for (const v1::ProblemProgress& p : r->problems) {
    std::cout << absl::StrFormat("  %-22s %-3s %5d tried  %10.2f us  best baseline %10.2f us  %.3fx\n",
                                 ShapeName(p.problem().shape()), LayoutName(p.problem().layout()),
                                 p.candidates_tried(), p.best_us(), p.best_baseline_us(), p.speedup());
    if (p.speedup() > 0) {
      log_sum += std::log(p.speedup());
      ++n;
    }
  }
  if (n > 0) std::cout << absl::StrFormat("geomean speedup over the best baseline: %.3fx (%d problems)\n",
                                          std::exp(log_sum / n), n);
  return kOk;
}

}  // namespace anvil::cli
