// anvil optimize: search kernels for problems on this node and store the
// winners (local mode: the coordinator's JobService in-process, with the
// embedded proposer and this node's LocalEvaluator). Progress lines go to stdout as they happen; an interrupted or
// budget-limited run resumes from the store when run again.
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/cli.h"
#include "proto/problem.h"
#include "reward/reward.h"
#include "seeds/seeds.h"
#include "server/job_service.h"
#include "server/local_evaluator.h"
#include "server/proposers/embedded/search.h"
#include "server/proposers/factory.h"
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
    return Report(absl::InvalidArgumentError("--figure must be one of " + FigureList()), kUsage);
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
  LocalEvaluatorOptions wo;
  wo.allow_no_isolation = g.allow_no_isolation;
  wo.build_jobs = a.build_jobs > 0 ? a.build_jobs
                                   : std::max(1, static_cast<int>(std::thread::hardware_concurrency() / 2));
  absl::StatusOr<std::unique_ptr<LocalEvaluator>> evaluator = LocalEvaluator::Create(wo);
  if (!evaluator.ok()) return Report(evaluator.status(), kUnavailable);
  absl::StatusOr<std::vector<SeedFamily>> seeds = LoadSeeds(DefaultSeedsDir(Toolchain::ExecutableDir()));
  if (!seeds.ok()) return Report(seeds.status(), kFailed);
  auto result = std::make_shared<std::optional<SearchResult>>();
  absl::StatusOr<std::unique_ptr<JobService>> service =
      LocalJobService(**store, **evaluator, *seeds, a, wo.build_jobs, result);
  if (!service.ok()) return Report(service.status(), kFailed);
  v1::OptimizeKernelRequest req;
  req.set_proposer("embedded");
  req.set_reward_figure(a.figure);
  req.mutable_budget()->set_max_wall_seconds(a.budget_minutes * 60);
  for (const ShapeSpec& s : *problems) {
    v1::Problem* p = req.add_problems();
    *p->mutable_shape() = s.shape;
    p->set_layout(s.layout);
  }
  absl::StatusOr<v1::Job> job = (*service)->CreateJob(req);
  if (!job.ok()) return Report(job.status(), kDatabase);
  std::cout << absl::StrFormat(
      "anvil optimize: job %s, %d problems, embedded proposer, %d seed families, budget %.0f min, "
      "%d nvcc jobs\n",
      job->id(), problems->size(), seeds->size(), a.budget_minutes, wo.build_jobs);
  absl::StatusOr<std::unique_ptr<Watch>> watch = (*service)->WatchJob(job->id(), [](const JobEvent& e) {
    if (e.kind == JobEventKind::kProblemDone || e.kind == JobEventKind::kLog) {
      std::cout << "  " << e.message << "\n" << std::flush;
    }
  });
  absl::StatusOr<v1::Job> done = (*service)->RunJob(job->id());
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
