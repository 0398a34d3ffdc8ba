// anvil report: one self-contained HTML file of what the store holds for a
// job or a GPU (report/report.h). Reads the store read-only.
#include <iostream>

#include "absl/strings/str_format.h"
#include "cli/cli.h"
#include "report/report.h"
#include "store/store.h"

namespace anvil::cli {

int RunReport(const Globals& g, const ReportArgs& a) {
  if (a.out.empty()) return Report(absl::InvalidArgumentError("--out FILE is required"), kUsage);
  StoreOptions options;
  options.read_only = true;
  options.create_if_missing = false;
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(g.db, options);
  if (!store.ok()) return Report(store.status(), kDatabase);
  report::ReportOptions ro;
  ro.job_id = a.job;
  ro.gpu = a.gpu;
  ro.figure = a.figure;
  absl::StatusOr<nlohmann::json> model = report::BuildReportModel(**store, ro);
  if (!model.ok()) {
    const bool bad_input = model.status().code() == absl::StatusCode::kNotFound ||
                           model.status().code() == absl::StatusCode::kInvalidArgument;
    return Report(model.status(), bad_input ? kUsage : kDatabase);
  }
  if (absl::Status st = report::WriteReport(**store, ro, a.out); !st.ok()) return Report(st, kFailed);
  const size_t problems = (*model)["problems"].size();
  if (g.json) {
    std::cout << nlohmann::json{{"out", a.out}, {"problems", problems},
                                {"figure", (*model)["figure"]}, {"regimes", (*model)["regimes"]}}
                     .dump()
              << "\n";
  } else {
    std::cout << absl::StrFormat("anvil report: %s (%d problems, ranking regime %s)\n", a.out,
                                 problems, (*model)["figure"].get<std::string>());
  }
  if (problems == 0) std::cerr << "anvil report: no measurements in this scope; the report says so\n";
  return kOk;
}

}  // namespace anvil::cli
