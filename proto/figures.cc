#include "proto/figures.h"

#include <iterator>

#include "absl/strings/str_join.h"

namespace anvil {

bool IsFigure(absl::string_view figure) {
  for (absl::string_view f : kFigures) {
    if (f == figure) return true;
  }
  return false;
}

std::string FigureList() { return absl::StrJoin(kFigures, ", "); }

namespace {

// The one map from a figure's name to its field of v1::Timings.
struct Field {
  absl::string_view name;
  bool (v1::Timings::*has)() const;
  const v1::TimingStats& (v1::Timings::*get)() const;
  v1::TimingStats* (v1::Timings::*mutable_get)();
};
constexpr Field kFields[] = {
    {"graph-cold", &v1::Timings::has_graph_cold, &v1::Timings::graph_cold,
     &v1::Timings::mutable_graph_cold},
    {"graph-hot", &v1::Timings::has_graph_hot, &v1::Timings::graph_hot,
     &v1::Timings::mutable_graph_hot},
    {"device", &v1::Timings::has_device, &v1::Timings::device, &v1::Timings::mutable_device},
    {"cold", &v1::Timings::has_cold, &v1::Timings::cold, &v1::Timings::mutable_cold},
    {"warm", &v1::Timings::has_warm, &v1::Timings::warm, &v1::Timings::mutable_warm},
    {"call", &v1::Timings::has_call, &v1::Timings::call, &v1::Timings::mutable_call},
};
static_assert(std::size(kFields) == kFigures.size());

const Field* FindField(absl::string_view figure) {
  for (const Field& f : kFields) {
    if (f.name == figure) return &f;
  }
  return nullptr;
}

}  // namespace

const v1::TimingStats* FigureField(const v1::Timings& t, absl::string_view figure, bool* has) {
  const Field* f = FindField(figure);
  *has = f != nullptr && (t.*(f->has))();
  return f != nullptr ? &(t.*(f->get))() : nullptr;
}

const v1::TimingStats* FigureStats(const v1::Timings& t, absl::string_view figure) {
  bool has = false;
  const v1::TimingStats* s = FigureField(t, figure, &has);
  return has && s->median_us() > 0 ? s : nullptr;
}

v1::TimingStats* MutableFigureStats(v1::Timings* t, absl::string_view figure) {
  const Field* f = FindField(figure);
  return f != nullptr ? (t->*(f->mutable_get))() : nullptr;
}

double FigureUs(const v1::Timings& t, absl::string_view figure) {
  const v1::TimingStats* s = FigureStats(t, figure);
  return s ? s->median_us() : 0;
}

const v1::Baseline* BestBaseline(const v1::Measurement& m, absl::string_view figure) {
  const v1::Baseline* best = nullptr;
  double best_us = 0;
  for (const v1::Baseline& b : m.baselines()) {
    const double us = FigureUs(b.timings(), figure);
    if (us > 0 && (best == nullptr || us < best_us)) best = &b, best_us = us;
  }
  return best;
}

double BestBaselineUs(const v1::Measurement& m, absl::string_view figure) {
  const v1::Baseline* b = BestBaseline(m, figure);
  return b != nullptr ? FigureUs(b->timings(), figure) : 0;
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

absl::string_view FidelityName(v1::Fidelity f) {
  return f == v1::FIDELITY_SCREEN ? "screen" : "full";
}

bool PredatesFigure(const v1::Measurement& m, absl::string_view figure) {
  return m.verdict() == v1::VERDICT_PASSED && FigureUs(m.timings(), figure) <= 0 &&
         (m.graph_note() == kPredatesGraphTiming || m.graph_note() == kGraphFiguresWithdrawn);
}

}  // namespace anvil
