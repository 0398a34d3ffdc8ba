// Robust summaries of timing samples (median, percentiles, spread).
// Pure functions; thread-safe.
#ifndef ANVIL_WORKER_RUNNER_STATS_H_
#define ANVIL_WORKER_RUNNER_STATS_H_

#include <algorithm>
#include <vector>

#include "anvil/v1/types.pb.h"

namespace anvil::runner {

// Linear-interpolated percentile q in [0, 1] of sorted values.
inline double Percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  double pos = q * (sorted.size() - 1);
  size_t lo = static_cast<size_t>(pos);
  size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (pos - lo) * (sorted[hi] - sorted[lo]);
}

inline v1::TimingStats Summarize(const std::vector<double>& samples_us) {
  v1::TimingStats s;
  for (double v : samples_us) s.add_sample_us(v);
  if (samples_us.empty()) return s;
  std::vector<double> sorted = samples_us;
  std::sort(sorted.begin(), sorted.end());
  s.set_samples(static_cast<int>(sorted.size()));
  s.set_median_us(Percentile(sorted, 0.5));
  s.set_min_us(sorted.front());
  s.set_p90_us(Percentile(sorted, 0.9));
  double med = s.median_us();
  s.set_spread(med > 0 ? (Percentile(sorted, 0.9) - Percentile(sorted, 0.1)) / med : 0);
  return s;
}

}  // namespace anvil::runner

#endif  // ANVIL_WORKER_RUNNER_STATS_H_
