// Which stored winners an export ships: the figures of a problem's verified
// best kernel in the two deployment regimes (CUDA-graph replay, hot and
// cold), taken over all of its verified re-measurements, and the rule that
// decides whether the kernel beats the best vendor baseline by the margin in
// both regimes with its spread taken into account. Everything the export
// knows about timing figures is in this module.
//
// Thread-safety: pure functions over a Store (which is itself thread-safe).
#ifndef ANVIL_EXPORT_SELECT_H_
#define ANVIL_EXPORT_SELECT_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "anvil/v1/types.pb.h"
#include "store/store.h"

namespace anvil::exporter {

// The two regimes the library is judged in.
enum class Regime { kHot, kCold };
const char* RegimeName(Regime regime);  // "hot", "cold"
// The store figure that measures `regime` (what BestKernel ranks by); its
// stats are read through proto/figures.h.
const char* RegimeFigure(Regime regime);
// The stats of `regime` inside a measurement's timings, for writing.
v1::TimingStats* MutableRegimeStats(v1::Timings* timings, Regime regime);

// One regime's figures of a kernel against the fastest vendor baseline.
struct RegimeFigures {
  std::string figure;          // store figure name, e.g. "graph-cold"
  double kernel_us = 0;        // median over re-measurements of the kernel's median
  double baseline_us = 0;      // median over re-measurements of the best baseline's median
  std::string baseline;        // the fastest baseline in most re-measurements
  double speedup = 0;          // median over re-measurements of baseline / kernel
  double speedup_low = 0;      // lower end of the speedup's spread (see PACKAGE.md)
  double speedup_high = 0;     // upper end
  int measurements = 0;        // verified re-measurements used
};

// A winner's figures in both regimes and where they were measured.
struct WinnerFigures {
  RegimeFigures hot, cold;
  std::string versions;          // "cudart=13000 driver=13000 cublas=130100 cublaslt=130100"
  int64_t measured_unix_ms = 0;  // newest re-measurement used
  int64_t workspace_bytes = 0;   // the kernel's workspace on this problem
};

// The figures of `candidate_id` on `problem` from its verified PASSED
// measurements taken with the newest ones' versions (CUDA, driver, cuBLAS).
// NotFound when it has none with figures in both regimes.
absl::StatusOr<WinnerFigures> FiguresOf(Store& store, const v1::Problem& problem,
                                        const std::string& candidate_id);

// Whether a kernel with `figures` is shipped: the lower end of its speedup's
// spread clears 1 + margin in both regimes. `why` says which regime failed.
bool ClearsMargin(const WinnerFigures& figures, double margin, std::string* why);

// The value of `key` in a versions string ("cublas=130100 ..."), 0 when absent.
int64_t VersionOf(const std::string& versions, const std::string& key);

}  // namespace anvil::exporter

#endif  // ANVIL_EXPORT_SELECT_H_
