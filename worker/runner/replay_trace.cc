#include "worker/runner/replay_trace.h"

#include <algorithm>

namespace anvil::runner {
namespace {

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

}  // namespace

ReplayTrace SummariseReplay(std::vector<Activity> acts) {
  std::erase_if(acts, [](const Activity& a) { return a.kind != Activity::kKernel; });
  std::sort(acts.begin(), acts.end(),
            [](const Activity& a, const Activity& b) { return a.start_ns < b.start_ns; });
  ReplayTrace t;
  t.kernels = static_cast<int>(acts.size());
  if (acts.empty()) return t;
  std::vector<double> durations, gaps;
  uint64_t last_end = 0;
  for (size_t i = 0; i < acts.size(); ++i) {
    durations.push_back(acts[i].us());
    if (i > 0) gaps.push_back((double(acts[i].start_ns) - double(acts[i - 1].end_ns)) * 1e-3);
    last_end = std::max(last_end, acts[i].end_ns);
  }
  t.kernel_us = Median(durations);
  t.gap_us = Median(gaps);
  t.span_us = (double(last_end) - double(acts.front().start_ns)) * 1e-3 / double(acts.size());
  return t;
}

}  // namespace anvil::runner
