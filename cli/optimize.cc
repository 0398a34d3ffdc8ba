// anvil optimize: search kernels for problems on this node and store the
// winners (local mode: the coordinator's JobService in-process, assembled as
// `anvil serve` assembles it (server/proposers/job_setup.h), measuring with
// this node's LocalEvaluator). The job's event stream feeds the progress
// display (cli/progress.h): live on a terminal, plain lines elsewhere; the
// summary is the one `--server optimize` prints (PrintJobSummary). An
// interrupted or budget-limited run resumes from the store when run again.
#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "cli/cli.h"
#include "cli/progress.h"
#include "node/node_facts.h"
#include "proto/figures.h"
#include "proto/problem.h"
#include "server/job_service.h"
#include "server/proposers/job_setup.h"
#include "server/rpc/local_components.h"
#include "server/rpc/options.h"
#include "store/writer_lock.h"
#include "worker/local_evaluator.h"

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

// One point of a problem's search curve: a new best after `tried` candidates
// of this job, `seconds` into it.
struct CurvePoint {
  std::string problem;
  int tried = 0;
  double speedup = 0;  // over the best baseline, by the job's figure
  double seconds = 0;
  std::string stage;
};

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

// The in-process coordinator of local mode, as `anvil serve` assembles its
// own: ServerOptions' job options and the node's proposers (NodeProposers),
// with this command's flags.
JobSetup LocalJobSetup(Store& store, CandidateEvaluator& evaluator, ProposerSetupOptions proposers,
                       const OptimizeArgs& a) {
  ServerOptions server;
  server.default_figure = a.figure;
  JobSetup setup;
  setup.store = &store;
  setup.evaluator = &evaluator;
  setup.job = JobOptionsOf(server);
  setup.proposers = std::move(proposers);
  setup.proposers.seeds_only = a.seeds_only;
  setup.proposers.transfer_from = a.transfer_from;
  return setup;
}

// Feeds the display from the job's event stream (JobService::WatchJob), keeps
// the search curve (new bests), and on a terminal ticks once a second to
// move the clock between events.
class LocalProgress {
 public:
  LocalProgress(DisplayOptions options, std::string figure)
      : figure_(std::move(figure)), display_(std::cout, options) {
    if (options.live) ticker_ = std::thread([this] {
      while (!done_.WaitForNotificationWithTimeout(absl::Seconds(1))) Tick();
    });
  }
  ~LocalProgress() { Stop(); }
  void Stop() {
    if (!done_.HasBeenNotified()) done_.Notify();
    if (ticker_.joinable()) ticker_.join();
    display_.Finish();
  }
  void OnEvent(const JobEvent& event) {
    ProgressEvent e = FromJobEvent(event);
    {
      absl::MutexLock lock(&mu_);
      if (event.usage.by_proposer.empty()) KeepTotals(e);
      if (event.kind == JobEventKind::kNewBest) AddToCurve(event);
      last_ = e;
      last_at_ = absl::Now();
    }
    display_.Handle(e);
  }
  std::vector<CurvePoint> curve() {
    absl::MutexLock lock(&mu_);
    return curve_;
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
  void AddToCurve(const JobEvent& event) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!event.measurement || event.problem < 0 || event.problem >= event.job.problems_size()) return;
    const v1::ProblemProgress& p = event.job.problems(event.problem);
    curve_.push_back({absl::StrCat(ShapeName(p.problem().shape()), " ", LayoutName(p.problem().layout())),
                      p.candidates_tried(), SpeedupOverBestBaseline(*event.measurement, figure_),
                      event.usage.wall_seconds, event.stage});
  }
  void Tick() {
    ProgressEvent e;
    {
      absl::MutexLock lock(&mu_);
      e = last_;
      if (e.state == "running") e.elapsed_s += absl::ToDoubleSeconds(absl::Now() - last_at_);
    }
    e.kind = ProgressEvent::Kind::kTick;
    e.message.clear();
    display_.Handle(e);
  }

  const std::string figure_;  // the curve's
  ProgressDisplay display_;
  absl::Mutex mu_;
  ProgressEvent last_ ABSL_GUARDED_BY(mu_);
  absl::Time last_at_ ABSL_GUARDED_BY(mu_) = absl::Now();
  std::vector<CurvePoint> curve_ ABSL_GUARDED_BY(mu_);
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
  absl::StatusOr<v1::OptimizeKernelRequest> req = OptimizeRequest(a);
  if (!req.ok()) return Report(req.status(), kUsage);
  absl::StatusOr<WriterLock> writer = WriterLock::Acquire(g.db, "anvil optimize");
  if (!writer.ok()) return Report(writer.status(), kDatabase);
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(g.db);
  if (!store.ok()) return Report(store.status(), kDatabase);
  std::string why;
  if (node::CountGpus(&why) == 0) {
    std::cerr << "anvil optimize: " << req->problems_size() << " problems, store " << g.db
              << " ready, but nothing can be measured here: " << why << ".\n"
              << NoGpuAdvice() << "\n";
    return kUnavailable;
  }
  LocalEvaluatorOptions wo;
  wo.allow_no_isolation = g.allow_no_isolation;
  wo.build_jobs = a.build_jobs > 0 ? a.build_jobs : DefaultBuildJobs();
  absl::StatusOr<std::unique_ptr<LocalEvaluator>> evaluator = LocalEvaluator::Create(wo);
  if (!evaluator.ok()) return Report(evaluator.status(), kUnavailable);
  ServerOptions with_llm;
  with_llm.llm_config = a.llm_config;
  absl::StatusOr<ProposerSetupOptions> proposers = NodeProposers(with_llm);
  if (!proposers.ok()) return Report(proposers.status(), kFailed);
  const size_t families = proposers->seeds.size();
  absl::StatusOr<std::unique_ptr<JobService>> service =
      MakeJobService(LocalJobSetup(**store, **evaluator, *std::move(proposers), a));
  if (!service.ok()) return Report(service.status(), kFailed);
  absl::StatusOr<v1::Job> job = (*service)->CreateJob(*req);
  if (!job.ok()) return Report(job.status(), kDatabase);
  if (!a.quiet) {
    std::cout << absl::StrFormat(
        "anvil optimize: job %s, %d problems, embedded proposer, %d seed families, budget %.0f min, "
        "%d nvcc jobs\n",
        job->id(), req->problems_size(), families, a.budget_minutes, wo.build_jobs);
  }
  LocalProgress progress(StdoutDisplayOptions(a.quiet, a.verbose), a.figure);
  absl::StatusOr<std::unique_ptr<Watch>> watch =
      (*service)->WatchJob(job->id(), [&progress](const JobEvent& e) { progress.OnEvent(e); });
  absl::StatusOr<v1::Job> done = (*service)->RunJob(job->id());
  if (watch.ok()) watch->reset();
  progress.Stop();
  if (!done.ok()) return Report(done.status(), kFailed);
  if (!a.curve_file.empty()) {
    if (absl::Status st = WriteCurve(a.curve_file, a.figure, progress.curve()); !st.ok()) return Report(st, kFailed);
  }
  PrintJobSummary(g, *done, a.figure);
  return done->state() == v1::JOB_STATE_SUCCEEDED ? kOk : kFailed;
}

}  // namespace anvil::cli
