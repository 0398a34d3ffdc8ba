// anvil optimize: search kernels for problems on this node and store the
// winners (local mode: proposer, builder, runner and store in one process
// tree). Progress lines go to stdout as they happen; an interrupted or
// budget-limited run resumes from the store when run again.
#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/cli.h"
#include "cli/progress.h"
#include "proto/problem.h"
#include "reward/reward.h"
#include "seeds/seeds.h"
#include "server/search.h"

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

// The search's lines as display events (until the search emits events itself).
ProgressEvent::Kind KindOfSearchLine(const std::string& line) {
  if (absl::StrContains(line, " did not build")) return ProgressEvent::Kind::kBuildFailed;
  if (absl::StrContains(line, "x -> ")) return ProgressEvent::Kind::kNewBest;
  return ProgressEvent::Kind::kLog;
}

// Feeds the display: the search's lines as they come, and (on a terminal) a
// tick a second with the job's totals read from the store.
class OptimizeProgress {
 public:
  OptimizeProgress(Store& store, std::string job_id, std::string figure, int problems,
                   double budget_s, DisplayOptions options)
      : store_(store), job_id_(std::move(job_id)), figure_(std::move(figure)), problems_(problems),
        budget_s_(budget_s), display_(std::cout, options), start_(std::chrono::steady_clock::now()) {
    if (options.live) ticker_ = std::thread([this] {
      while (!done_.WaitForNotificationWithTimeout(absl::Seconds(1))) Emit(ProgressEvent::Kind::kTick, "");
    });
  }
  ~OptimizeProgress() { Stop(); }
  void Stop() {
    if (!done_.HasBeenNotified()) done_.Notify();
    if (ticker_.joinable()) ticker_.join();
    display_.Finish();
  }
  void Emit(ProgressEvent::Kind kind, const std::string& message) {
    ProgressEvent e;
    e.kind = kind;
    e.message = message;
    e.job_id = job_id_;
    e.problems_total = problems_;
    e.budget_s = budget_s_;
    e.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    if (absl::StatusOr<JobActivity> a = store_.GetJobActivity(job_id_, figure_); a.ok()) {
      FillFromActivity(*a, problems_, e);
    }
    display_.Handle(e);
  }

 private:
  Store& store_;
  const std::string job_id_, figure_;
  const int problems_;
  const double budget_s_;
  ProgressDisplay display_;
  const std::chrono::steady_clock::time_point start_;
  absl::Notification done_;
  std::thread ticker_;
};

}  // namespace

absl::StatusOr<v1::OptimizeKernelRequest> OptimizeRequest(const OptimizeArgs& a) {
  absl::StatusOr<std::vector<ShapeSpec>> problems = Problems(a);
  if (!problems.ok()) return problems.status();
  if (!IsFigure(a.figure)) return absl::InvalidArgumentError("--figure must be device, warm, cold or call");
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
  }
  return req;
}

int RunOptimize(const Globals& g, const OptimizeArgs& a) {
  absl::StatusOr<std::vector<ShapeSpec>> problems = Problems(a);
  if (!problems.ok()) return Report(problems.status(), kUsage);
  if (!IsFigure(a.figure)) {
    return Report(absl::InvalidArgumentError("--figure must be device, warm, cold or call"), kUsage);
  }
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(g.db);
  if (!store.ok()) return Report(store.status(), kDatabase);
  std::string why;
  if (CountGpus(&why) == 0) {
    std::cerr << "anvil optimize: " << problems->size() << " problems, store " << g.db
              << " ready, but nothing can be measured here: " << why << ".\n"
              << NoGpuAdvice() << "\n";
    return kUnavailable;
  }
  LocalWorkerOptions wo;
  wo.build_jobs = a.build_jobs > 0 ? a.build_jobs
                                   : std::max(1, static_cast<int>(std::thread::hardware_concurrency() / 2));
  absl::StatusOr<std::unique_ptr<LocalWorker>> worker = LocalWorker::Create(wo);
  if (!worker.ok()) return Report(worker.status(), kUnavailable);
  absl::StatusOr<std::vector<SeedFamily>> seeds = LoadSeeds(DefaultSeedsDir(Toolchain::ExecutableDir()));
  if (!seeds.ok()) return Report(seeds.status(), kFailed);
  std::string job_id = absl::StrCat("job-", std::chrono::system_clock::now().time_since_epoch().count());
  v1::OptimizeKernelRequest req;
  req.set_proposer("embedded");
  req.set_reward_figure(a.figure);
  for (const ShapeSpec& s : *problems) {
    v1::Problem* p = req.add_problems();
    *p->mutable_shape() = s.shape;
    p->set_layout(s.layout);
    p->set_dtype(v1::DTYPE_F16_F32ACC);
  }
  if (absl::Status st = (*store)->CreateJob(job_id, req); !st.ok()) return Report(st, kDatabase);
  (void)(*store)->UpdateJobState(job_id, v1::JOB_STATE_RUNNING);
  if (!a.quiet) {
    std::cout << absl::StrFormat(
        "anvil optimize: job %s, %d problems, embedded proposer, %d seed families, budget %.0f min, "
        "%d nvcc jobs\n",
        job_id, problems->size(), seeds->size(), a.budget_minutes, wo.build_jobs);
  }
  SearchOptions so;
  so.budget_seconds = a.budget_minutes * 60;
  so.seeds_only = a.seeds_only;
  so.transfer_from = a.transfer_from;
  so.figure = a.figure;
  so.build_chunk = std::max(8, 2 * wo.build_jobs);
  OptimizeProgress progress(**store, job_id, a.figure, static_cast<int>(problems->size()),
                            so.budget_seconds, StdoutDisplayOptions(a.quiet, a.verbose));
  absl::StatusOr<SearchResult> r =
      RunSearch(*seeds, *problems, job_id, **worker, **store, so,
                [&progress](const std::string& line) { progress.Emit(KindOfSearchLine(line), "  " + line); });
  progress.Stop();
  if (!r.ok()) {
    (void)(*store)->UpdateJobState(job_id, v1::JOB_STATE_FAILED, std::string(r.status().message()));
    return Report(r.status(), kFailed);
  }
  (void)(*store)->UpdateJobState(job_id, v1::JOB_STATE_SUCCEEDED);
  if (!a.curve_file.empty()) {
    if (absl::Status st = WriteCurve(a.curve_file, a.figure, r->curve); !st.ok()) return Report(st, kFailed);
  }
  const double minutes = std::max(r->wall_seconds, 1.0) / 60;
  std::cout << absl::StrFormat(
      "done in %.1f min%s: %d candidates built (%d failed; %.1f/min, %.0f s building, %.0f s of it "
      "not hidden by measuring), %d measurements (%.1f/min, %.0f s measuring)\n"
      "best verified per problem (%s time):\n",
      minutes, r->budget_exhausted ? " (budget spent: rerun to resume)" : "", r->candidates_built,
      r->build_failures, r->candidates_built / minutes, r->build_seconds, r->build_wait_seconds,
      r->measurements, r->measurements / minutes, r->measure_seconds, a.figure);
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
