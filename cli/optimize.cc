// anvil optimize: search kernels for problems on this node and store the
// winners (local mode: proposer, builder, runner and store in one process tree).
#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/cli.h"
#include "proto/problem.h"
#include "seeds/seeds.h"
#include "server/seed_sweep.h"

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
  if (specs.empty()) {  // the embedded default: the bundled development shapes
    absl::StatusOr<std::vector<ShapeSpec>> d = ParseShapesFile(
        "4096 4096 4096 nt\n16 4096 4096 nt\n1000 1000 1000 nt\n512 2048 512 nn\n");
    specs = *d;
  }
  return specs;
}

}  // namespace

int RunOptimize(const Globals& g, const OptimizeArgs& a) {
  absl::StatusOr<std::vector<ShapeSpec>> problems = Problems(a);
  if (!problems.ok()) return Report(problems.status(), kUsage);
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(g.db);
  if (!store.ok()) return Report(store.status(), kDatabase);
  std::string why;
  if (CountGpus(&why) == 0) {
    std::cerr << "anvil optimize: " << problems->size() << " problems, store " << g.db
              << " ready, but nothing can be measured here: " << why << ".\n"
              << NoGpuAdvice() << "\n";
    return kUnavailable;
  }
  absl::StatusOr<std::unique_ptr<LocalWorker>> worker = LocalWorker::Create({});
  if (!worker.ok()) return Report(worker.status(), kUnavailable);
  absl::StatusOr<std::vector<SeedFamily>> seeds = LoadSeeds(DefaultSeedsDir(Toolchain::ExecutableDir()));
  if (!seeds.ok()) return Report(seeds.status(), kFailed);
  std::string job_id = absl::StrCat("job-", std::chrono::system_clock::now().time_since_epoch().count());
  v1::OptimizeKernelRequest req;
  req.set_proposer("embedded");
  for (const ShapeSpec& s : *problems) {
    v1::Problem* p = req.add_problems();
    *p->mutable_shape() = s.shape;
    p->set_layout(s.layout);
    p->set_dtype(v1::DTYPE_F16_F32ACC);
  }
  if (absl::Status st = (*store)->CreateJob(job_id, req); !st.ok()) return Report(st, kDatabase);
  (void)(*store)->UpdateJobState(job_id, v1::JOB_STATE_RUNNING);
  std::cout << "anvil optimize: job " << job_id << ", " << problems->size()
            << " problems, embedded proposer (seed sweep; the structured knob search is not built yet)\n";
  absl::StatusOr<SweepResult> r = RunSeedSweep(*seeds, *problems, job_id, **worker, **store,
                                               [](const std::string& line) { std::cout << "  " << line << "\n" << std::flush; });
  if (!r.ok()) {
    (void)(*store)->UpdateJobState(job_id, v1::JOB_STATE_FAILED, std::string(r.status().message()));
    return Report(r.status(), kFailed);
  }
  (void)(*store)->UpdateJobState(job_id, v1::JOB_STATE_SUCCEEDED);
  std::cout << absl::StrFormat("done: %d candidates built, %d measurements; best verified per problem:\n",
                               r->candidates_built, r->measurements);
  for (const v1::ProblemProgress& p : r->problems) {
    std::cout << absl::StrFormat("  %-22s %-3s %10.2f us  best baseline %10.2f us  %.3fx\n",
                                 ShapeName(p.problem().shape()), LayoutName(p.problem().layout()),
                                 p.best_us(), p.best_baseline_us(), p.speedup());
  }
  return kOk;
}

}  // namespace anvil::cli
