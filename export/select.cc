#include "export/select.h"

#include <algorithm>
#include <map>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "proto/figures.h"

namespace anvil::exporter {
namespace {

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// One re-measurement's view of a regime: the kernel, the fastest baseline.
struct Point {
  double kernel_us = 0, kernel_spread = 0;
  double baseline_us = 0, baseline_spread = 0;
  std::string baseline;
};

bool PointOf(const v1::Measurement& m, Regime regime, Point* p) {
  const v1::TimingStats* k = FigureStats(m.timings(), RegimeFigure(regime));
  const v1::Baseline* b = BestBaseline(m, RegimeFigure(regime));
  if (k == nullptr || b == nullptr) return false;
  const v1::TimingStats& base = *FigureStats(b->timings(), RegimeFigure(regime));
  p->kernel_us = k->median_us();
  p->kernel_spread = k->spread();
  p->baseline_us = base.median_us();
  p->baseline_spread = base.spread();
  p->baseline = b->name();
  return true;
}

RegimeFigures Summarise(const std::vector<Point>& points, Regime regime) {
  RegimeFigures f;
  f.figure = RegimeFigure(regime);
  f.measurements = static_cast<int>(points.size());
  std::vector<double> kernel, base, speedup;
  std::map<std::string, int> votes;
  for (const Point& p : points) {
    kernel.push_back(p.kernel_us);
    base.push_back(p.baseline_us);
    speedup.push_back(p.baseline_us / p.kernel_us);
    ++votes[p.baseline];
  }
  f.kernel_us = Median(kernel);
  f.baseline_us = Median(base);
  f.speedup = Median(speedup);
  int best = 0;
  for (const auto& [name, n] : votes) {
    if (n > best) best = n, f.baseline = name;
  }
  if (points.size() >= 2) {  // fresh-process re-measurements: their range
    f.speedup_low = *std::min_element(speedup.begin(), speedup.end());
    f.speedup_high = *std::max_element(speedup.begin(), speedup.end());
  } else {  // one measurement: its samples' spread, kernel and baseline together
    const double half = 0.5 * (points[0].kernel_spread + points[0].baseline_spread);
    f.speedup_low = f.speedup * std::max(0.0, 1 - half);
    f.speedup_high = f.speedup * (1 + half);
  }
  return f;
}

}  // namespace

const char* RegimeName(Regime regime) { return regime == Regime::kHot ? "hot" : "cold"; }

// The deployment figures: CUDA-graph replay, one operand set (hot) or sets
// rotated past twice the L2 (cold); proto/figures.h reads them.
const char* RegimeFigure(Regime regime) {
  return regime == Regime::kHot ? "graph-hot" : "graph-cold";
}

v1::TimingStats* MutableRegimeStats(v1::Timings* timings, Regime regime) {
  return MutableFigureStats(timings, RegimeFigure(regime));
}

absl::StatusOr<WinnerFigures> FiguresOf(Store& store, const v1::Problem& problem,
                                        const std::string& candidate_id) {
  absl::StatusOr<std::vector<StoredMeasurement>> history = store.SearchHistory(problem);
  if (!history.ok()) return history.status();
  std::vector<const v1::Measurement*> runs;  // verified, with both graph figures
  WinnerFigures w;
  for (const StoredMeasurement& s : *history) {
    const v1::Measurement& m = s.measurement;
    if (m.candidate_id() == candidate_id && m.verdict() == v1::VERDICT_PASSED && m.verified()) {
      runs.push_back(&m);
    }
  }
  for (const v1::Measurement* m : runs) {  // the newest runs' versions
    if (m->measured_at_unix_ms() >= w.measured_unix_ms) {
      w.measured_unix_ms = m->measured_at_unix_ms();
      w.versions = m->versions();
    }
  }
  std::vector<Point> hot, cold;
  for (const v1::Measurement* run : runs) {
    const v1::Measurement& m = *run;
    if (m.versions() != w.versions) continue;  // figures from other libraries do not mix
    Point h, c;
    if (!PointOf(m, Regime::kHot, &h) || !PointOf(m, Regime::kCold, &c)) continue;
    hot.push_back(h);
    cold.push_back(c);
    w.workspace_bytes = std::max(w.workspace_bytes, m.workspace_bytes());
  }
  if (hot.empty()) {
    return absl::NotFoundError(absl::StrCat("candidate ", candidate_id.substr(0, 8),
                                            " has no verified measurement with graph-hot and "
                                            "graph-cold figures"));
  }
  w.hot = Summarise(hot, Regime::kHot);
  w.cold = Summarise(cold, Regime::kCold);
  return w;
}

bool ClearsMargin(const WinnerFigures& figures, double margin, std::string* why) {
  for (Regime r : {Regime::kHot, Regime::kCold}) {
    const RegimeFigures& f = r == Regime::kHot ? figures.hot : figures.cold;
    if (f.speedup_low < 1 + margin) {
      *why = absl::StrFormat("%s speedup %.3fx (low end %.3fx) does not clear %.3fx",
                             RegimeName(r), f.speedup, f.speedup_low, 1 + margin);
      return false;
    }
  }
  why->clear();
  return true;
}

int64_t VersionOf(const std::string& versions, const std::string& key) {
  for (absl::string_view part : absl::StrSplit(versions, ' ', absl::SkipEmpty())) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(part, '=');
    int64_t v = 0;
    if (kv.first == key && absl::SimpleAtoi(kv.second, &v)) return v;
  }
  return 0;
}

}  // namespace anvil::exporter
