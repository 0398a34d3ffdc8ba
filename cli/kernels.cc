// anvil kernels: the best verified kernel per problem (or one job's winners),
// from the store or, with --server, from `anvil serve`.
#include <cstdio>
#include <iostream>

#include "absl/strings/str_format.h"
#include "cli/cli.h"
#include "proto/problem.h"
#include "reward/reward.h"
#include "server/rpc/winners.h"
#include "store/store.h"

namespace anvil::cli {
namespace {

// "1.052x [1.041-1.060] of 3" from the kernel's verified runs by `figure`.
std::string SpreadText(const v1::Kernel& k, const std::string& figure) {
  for (const v1::SpeedupSpread& s : k.spreads()) {
    if (s.figure() != figure) continue;
    return absl::StrFormat("%.3fx [%.3f-%.3f] of %d", s.median(), s.min(), s.max(), s.runs());
  }
  return "-";
}

}  // namespace

void PrintKernels(const Globals& g, const std::vector<v1::Kernel>& kernels, const std::string& figure,
                  const std::string& where) {
  if (g.json) {
    v1::ListKernelsResponse r;
    for (const v1::Kernel& k : kernels) *r.add_kernels() = k;
    std::cout << ToJson(r) << "\n";
    return;
  }
  if (kernels.empty()) {
    std::cout << "No verified kernels stored yet in " << where
              << ". Run `anvil optimize` on a GPU node to find some.\n";
    return;
  }
  std::cout << absl::StrFormat("%-18s %-22s %-4s %-44s %10s %10s %8s  %s\n", "gpu", "shape", "lay",
                               "kernel", figure + " us", "best base", "speedup",
                               "verified runs: median [min-max] of the speedup");
  for (const v1::Kernel& k : kernels) {
    const v1::Measurement& m = k.measurement();
    double ours = FigureUs(m.timings(), figure), base = BestBaselineUs(m, figure);
    std::cout << absl::StrFormat("%-18s %-22s %-4s %-44s %10.2f %10.2f %7.3fx  %s\n",
                                 m.problem().gpu(), ShapeName(m.problem().shape()),
                                 LayoutName(m.problem().layout()), k.candidate().name(), ours, base,
                                 ours > 0 ? base / ours : 0.0, SpreadText(k, figure));
  }
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
  if (!g.server.empty()) {
    v1::ListKernelsRequest req;
    req.set_gpu(gpu);
    req.set_layout(layout);
    req.set_figure(figure);
    req.set_job_id(job);
    req.set_limit(1000);
    return RunKernelsRemote(g, req);
  }
  StoreOptions opts;
  opts.read_only = true;
  opts.create_if_missing = false;
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(g.db, opts);
  if (!store.ok()) return Report(store.status(), kDatabase);
  absl::StatusOr<std::vector<v1::Kernel>> kernels = ListWinners(**store, gpu, layout, figure, job, 1000);
  if (!kernels.ok()) {  // an unknown --job is bad input, not a broken database
    return Report(kernels.status(),
                  !job.empty() && absl::IsNotFound(kernels.status()) ? kUsage : kDatabase);
  }
  PrintKernels(g, *kernels, figure, g.db);
  return kOk;
}

}  // namespace anvil::cli
