#include <cstdio>
#include <iostream>


#include "absl/strings/str_format.h"
#include "cli/cli.h"
#include "proto/problem.h"
#include "reward/reward.h"
#include "store/store.h"

namespace anvil::cli {

namespace {

// A job's verified winner per problem, with the measurement the job reported:
// its own re-measurement of the winner (the problems it found none for are left
// out). A job that predates those re-measurements reported the winner's fastest
// verified one, from any job: that is what it gets.
absl::StatusOr<std::vector<v1::Kernel>> JobKernels(Store& store, const std::string& job_id,
                                                   const std::string& figure) {
  absl::StatusOr<v1::Job> job = store.GetJob(job_id);
  if (!job.ok()) return job.status();
  std::vector<v1::Kernel> out;
  for (const v1::ProblemProgress& p : job->problems()) {
    if (p.best_candidate_id().empty()) continue;
    absl::StatusOr<v1::Kernel> k = store.GetKernel(p.best_candidate_id(), p.problem(), figure, job_id);
    if (k.ok() && !k->has_measurement()) k = store.GetKernel(p.best_candidate_id(), p.problem(), figure);
    if (!k.ok()) return k.status();
    out.push_back(*std::move(k));
  }
  return out;
}

}  // namespace

// "1.052x [1.041-1.060] of 3" from the kernel's verified runs by `figure`.
static std::string SpreadText(const v1::Kernel& k, const std::string& figure) {
  for (const v1::SpeedupSpread& s : k.spreads()) {
    if (s.figure() != figure) continue;
    return absl::StrFormat("%.3fx [%.3f-%.3f] of %d", s.median(), s.min(), s.max(), s.runs());
  }
  return "-";
}

int RunKernels(const Globals& g, const std::string& gpu, const std::string& layout_text,
               const std::string& figure, const std::string& job) {
  v1::Layout layout = v1::LAYOUT_UNSPECIFIED;
  if (!layout_text.empty()) {
    absl::StatusOr<v1::Layout> l = ParseLayout(layout_text);
    if (!l.ok()) return Report(l.status(), kUsage);
    layout = *l;
  }
  if (!IsFigure(figure)) {
    return Report(absl::InvalidArgumentError("--figure must be one of " + FigureList()), kUsage);
  }
  StoreOptions opts;
  opts.read_only = true;
  opts.create_if_missing = false;
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(g.db, opts);
  if (!store.ok()) return Report(store.status(), kDatabase);
  absl::StatusOr<std::vector<v1::Kernel>> kernels =
      job.empty() ? (*store)->ListBestKernels(gpu, layout, figure, 1000)
                  : JobKernels(**store, job, figure);
  if (!kernels.ok()) {  // an unknown --job is bad input, not a broken database
    return Report(kernels.status(),
                  !job.empty() && absl::IsNotFound(kernels.status()) ? kUsage : kDatabase);
  }
  if (g.json) {
    v1::ListKernelsResponse r;
    for (const v1::Kernel& k : *kernels) *r.add_kernels() = k;
    std::cout << ToJson(r) << "\n";
    return kOk;
  }
  if (kernels->empty()) {
    std::cout << "No verified kernels stored yet in " << g.db
              << ". Run `anvil optimize` on a GPU node to find some.\n";
    return kOk;
  }
  std::cout << absl::StrFormat("%-18s %-22s %-4s %-44s %10s %10s %8s  %s\n", "gpu", "shape", "lay",
                               "kernel", figure + " us", "best base", "speedup",
                               "verified runs: median [min-max] of the speedup");
  for (const v1::Kernel& k : *kernels) {
    const v1::Measurement& m = k.measurement();
    double ours = FigureUs(m.timings(), figure), base = BestBaselineUs(m, figure);
    std::cout << absl::StrFormat("%-18s %-22s %-4s %-44s %10.2f %10.2f %7.3fx  %s\n",
                                 m.problem().gpu(), ShapeName(m.problem().shape()),
                                 LayoutName(m.problem().layout()), k.candidate().name(), ours, base,
                                 ours > 0 ? base / ours : 0.0, SpreadText(k, figure));
  }
  return kOk;
}

}  // namespace anvil::cli
