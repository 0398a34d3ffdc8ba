// anvil export: the per-GPU kernel package (export/export.h).
#include <iostream>

#include "absl/strings/str_format.h"
#include "cli/cli.h"
#include "export/export.h"
#include "nlohmann/json.hpp"
#include "store/store.h"

namespace anvil::cli {

int RunExport(const Globals& g, const ExportArgs& a) {
  StoreOptions opts;
  opts.read_only = true;
  opts.create_if_missing = false;
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(g.db, opts);
  if (!store.ok()) return Report(store.status(), kDatabase);
  ExportOptions o;
  o.gpu = a.gpu;
  o.problems_file = a.problems_file;
  o.out_dir = a.out_dir;
  o.margin = a.margin;
  absl::StatusOr<ExportReport> r = ExportLibrary(**store, o);
  if (!r.ok()) {
    const absl::StatusCode c = r.status().code();
    const bool input = c == absl::StatusCode::kInvalidArgument || c == absl::StatusCode::kNotFound ||
                       c == absl::StatusCode::kFailedPrecondition;
    return Report(r.status(), input ? kUsage : kFailed);
  }
  if (g.json) {
    nlohmann::json j = {{"output_dir", r->out_dir}, {"kernels", r->kernels}, {"fallbacks", r->fallbacks}};
    std::cout << j.dump() << "\n";
    return kOk;
  }
  for (const ExportedShape& s : r->shapes) {
    std::cout << absl::StrFormat("%-22s %-3s %-9s %s\n", ShapeName(s.spec.shape),
                                 LayoutName(s.spec.layout), s.path,
                                 s.path == "kernel" ? s.kernel : s.reason);
  }
  std::cout << absl::StrFormat("%s: %d shapes served by kernels, %d by cuBLASLt/cuBLAS "
                               "(build: cmake -S %s -B %s/build && cmake --build %s/build)\n",
                               r->out_dir, r->kernels, r->fallbacks, r->out_dir, r->out_dir,
                               r->out_dir);
  return kOk;
}

}  // namespace anvil::cli
