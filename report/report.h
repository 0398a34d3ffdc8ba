// Report: what a search found, as one self-contained HTML file. The data
// (per-problem speedups in every timing regime, search curves, a roofline,
// failures and rewards) is read from the store into a JSON model; the page
// is a template with that model as a data island and plotly.js embedded, so
// it opens from disk with no network. Model format: report/REPORT.md.
//
// Thread-safety: free functions; they share nothing. The Store serialises
// its own calls.
#ifndef ANVIL_REPORT_REPORT_H_
#define ANVIL_REPORT_REPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "store/store.h"

namespace anvil::report {

struct ReportOptions {
  std::string job_id;  // only this job's measurements (and its time window for builds)
  std::string gpu;     // only problems on this device model; empty: every GPU
  // The figure that picks each problem's winner and draws its curve; empty:
  // the job's reward figure, else the first regime with values (in the order
  // of kFigures, proto/figures.h).
  std::string figure;
  int64_t now_unix_ms = 0;  // stamp of the report; 0: the system clock
};

// The report's JSON model (REPORT.md). NotFound for an unknown job;
// InvalidArgument for an unknown figure. A scope with no measurements gives
// a model with no problems, not an error.
absl::StatusOr<nlohmann::json> BuildReportModel(Store& store, const ReportOptions& options);

// The HTML page of a model: the template with the model and plotly.js inlined.
std::string RenderReportHtml(const nlohmann::json& model);

// BuildReportModel + RenderReportHtml, written to `path` (whole or not at all:
// a temporary file renamed into place).
absl::Status WriteReport(Store& store, const ReportOptions& options, const std::string& path);

// JSON text safe inside an HTML <script> element ("</" and "<!--" escaped).
std::string ScriptSafeJson(const nlohmann::json& value);

}  // namespace anvil::report

#endif  // ANVIL_REPORT_REPORT_H_
