// How a job looks on the terminal, the same in local mode and with --server:
// one indented line per progress event, then the winners' table.
#include <cmath>
#include <iostream>

#include "absl/strings/str_format.h"
#include "cli/cli.h"
#include "proto/problem.h"

namespace anvil::cli {

void PrintProgress(const Globals& g, const v1::JobProgress& p) {
  if (g.json) {
    std::cout << ToJson(p) << "\n" << std::flush;
  } else if (!p.message().empty()) {
    std::cout << "  " << p.message() << "\n" << std::flush;
  }
}

void PrintJobSummary(const Globals& g, const v1::Job& job, const std::string& figure) {
  if (g.json) {
    std::cout << ToJson(job) << "\n";
    return;
  }
  std::cout << absl::StrFormat("job %s %s after %.1f min (%.0f GPU s)%s\n", job.id(),
                               JobStateName(job.state()), job.wall_seconds() / 60, job.gpu_seconds(),
                               job.error().empty() ? "" : ": " + job.error());
  std::cout << "best verified per problem (" << figure << " time):\n";
  double log_sum = 0;
  int n = 0;
  for (const v1::ProblemProgress& p : job.problems()) {
    std::cout << absl::StrFormat("  %-22s %-3s %5d tried  %10.2f us  best baseline %10.2f us  %.3fx%s\n",
                                 ShapeName(p.problem().shape()), LayoutName(p.problem().layout()),
                                 p.candidates_tried(), p.best_us(), p.best_baseline_us(), p.speedup(),
                                 p.status().empty() ? "" : "  (" + p.status() + ")");
    if (p.speedup() > 0) {
      log_sum += std::log(p.speedup());
      ++n;
    }
  }
  if (n > 0) {
    std::cout << absl::StrFormat("geomean speedup over the best baseline: %.3fx (%d problems)\n",
                                 std::exp(log_sum / n), n);
  }
}

std::string JobStateName(v1::JobState state) {
  switch (state) {
    case v1::JOB_STATE_QUEUED: return "queued";
    case v1::JOB_STATE_RUNNING: return "running";
    case v1::JOB_STATE_SUCCEEDED: return "succeeded";
    case v1::JOB_STATE_FAILED: return "failed";
    case v1::JOB_STATE_CANCELLED: return "cancelled";
    default: return "unknown";
  }
}

}  // namespace anvil::cli
