// The cross-check's input: one row per stored winner to time again, as
// `anvil kernels --json` describes it, flattened to CSV by the caller:
//   m,n,k,layout,library,runner_graph_cold,runner_graph_hot
// (runner_* are the runner's speedups over the best baseline by that figure,
// 0 when the runner had none). '#' lines and a header line starting with "m,"
// are skipped. Pure functions; thread-safe.
#ifndef ANVIL_BENCH_CROSSCHECK_PLAN_H_
#define ANVIL_BENCH_CROSSCHECK_PLAN_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace anvil::crosscheck {

struct Row {
  int m = 0, n = 0, k = 0;
  bool nt = true;                 // layout "nt" (else "nn")
  std::string library;            // the candidate's shared object
  double runner_cold = 0;         // the runner's graph-cold speedup
  double runner_hot = 0;          // the runner's graph-hot speedup
};

// InvalidArgument naming the line for a malformed row.
absl::StatusOr<std::vector<Row>> ParsePlan(absl::string_view text);

// |ours / theirs - 1| <= tolerance; false when either is missing (<= 0).
bool Agrees(double ours, double theirs, double tolerance);

}  // namespace anvil::crosscheck

#endif  // ANVIL_BENCH_CROSSCHECK_PLAN_H_
