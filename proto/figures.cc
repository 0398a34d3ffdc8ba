#include "proto/figures.h"

#include "absl/strings/str_join.h"

namespace anvil {

bool IsFigure(absl::string_view figure) {
  for (absl::string_view f : kFigures) {
    if (f == figure) return true;
  }
  return false;
}

std::string FigureList() { return absl::StrJoin(kFigures, ", "); }

const v1::TimingStats* FigureStats(const v1::Timings& t, absl::string_view figure) {
  const v1::TimingStats* s = nullptr;
  bool has = false;
  if (figure == "graph-cold") s = &t.graph_cold(), has = t.has_graph_cold();
  if (figure == "graph-hot") s = &t.graph_hot(), has = t.has_graph_hot();
  if (figure == "device") s = &t.device(), has = t.has_device();
  if (figure == "cold") s = &t.cold(), has = t.has_cold();
  if (figure == "warm") s = &t.warm(), has = t.has_warm();
  if (figure == "call") s = &t.call(), has = t.has_call();
  return has && s->median_us() > 0 ? s : nullptr;
}

double FigureUs(const v1::Timings& t, absl::string_view figure) {
  const v1::TimingStats* s = FigureStats(t, figure);
  return s ? s->median_us() : 0;
}

double BestBaselineUs(const v1::Measurement& m, absl::string_view figure) {
  double best = 0;
  for (const v1::Baseline& b : m.baselines()) {
    double v = FigureUs(b.timings(), figure);
    if (v > 0 && (best == 0 || v < best)) best = v;
  }
  return best;
}

double SpeedupOverBestBaseline(const v1::Measurement& m, absl::string_view figure) {
  const double ours = FigureUs(m.timings(), figure), base = BestBaselineUs(m, figure);
  return ours > 0 && base > 0 ? base / ours : 0;
}

double RankingUs(const v1::Measurement& m, absl::string_view figure) {
  return m.verdict() == v1::VERDICT_PASSED ? FigureUs(m.timings(), figure) : 0;
}

bool Beats(double challenger_us, double incumbent_us) {
  return challenger_us > 0 && (incumbent_us <= 0 || challenger_us < incumbent_us);
}

bool Beats(const v1::Measurement& challenger, const v1::Measurement& incumbent,
           absl::string_view figure) {
  return Beats(RankingUs(challenger, figure), RankingUs(incumbent, figure));
}

bool PredatesFigure(const v1::Measurement& m, absl::string_view figure) {
  return m.verdict() == v1::VERDICT_PASSED && FigureUs(m.timings(), figure) <= 0 &&
         (m.graph_note() == kPredatesGraphTiming || m.graph_note() == kGraphFiguresWithdrawn);
}

}  // namespace anvil
