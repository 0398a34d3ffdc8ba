// The timing figures by name: which field of v1::Timings each name reads and
// how a speedup over the best baseline is formed from them. One place for
// every component (store, reward, search, CLI, export, report). Pure
// functions; thread-safe.
//
// Names (Timings in types.proto says what each measures):
//   "graph-cold"  CUDA-graph replay, operand sets rotated past twice the L2
//                 (the default ranking figure: what an inference step pays)
//   "graph-hot"   CUDA-graph replay on one operand set (what fits stays in L2)
//   "device"      one isolated call on fresh operands, CUPTI activity sum
//   "cold"        one call after an L2 flush (events)
//   "warm"        eager back-to-back calls (events)
//   "call"        host time around one call plus a device sync
#ifndef ANVIL_PROTO_FIGURES_H_
#define ANVIL_PROTO_FIGURES_H_

#include <array>
#include <string>

#include "absl/strings/string_view.h"
#include "anvil/v1/types.pb.h"

namespace anvil {

inline constexpr absl::string_view kDefaultFigure = "graph-cold";
inline constexpr std::array<absl::string_view, 6> kFigures = {"graph-cold", "graph-hot", "device",
                                                              "cold",       "warm",      "call"};

// True for the six names above.
bool IsFigure(absl::string_view figure);
// "graph-cold, graph-hot, device, cold, warm, call", for error messages.
std::string FigureList();
// The stats of `figure` in t; nullptr when the name is unknown or the figure
// was not measured (absent, or a median <= 0).
const v1::TimingStats* FigureStats(const v1::Timings& t, absl::string_view figure);
// The field of `figure` in t, set or not, and whether it is set (for
// encoders that keep a field as it is); nullptr for an unknown name.
const v1::TimingStats* FigureField(const v1::Timings& t, absl::string_view figure, bool* has);
// The field of `figure` in t for writing (marks it set); nullptr for an
// unknown name.
v1::TimingStats* MutableFigureStats(v1::Timings* t, absl::string_view figure);
// The median of `figure` in t (0 when absent).
double FigureUs(const v1::Timings& t, absl::string_view figure);
// The fastest baseline of m by `figure` (of equal medians the first);
// nullptr when none has the figure. Its stats: FigureStats(b->timings(), figure).
const v1::Baseline* BestBaseline(const v1::Measurement& m, absl::string_view figure);
// The fastest baseline's median of `figure` in m (us), 0 when none has it.
double BestBaselineUs(const v1::Measurement& m, absl::string_view figure);
// BestBaselineUs / the candidate's median of `figure`; 0 when either is absent.
double SpeedupOverBestBaseline(const v1::Measurement& m, absl::string_view figure);

// The one rule for "the best kernel of a problem by `figure`", used by the
// job, the proposers, the store's queries, the report and the export:
// a measurement ranks when it passed and has the figure (RankingUs > 0); of
// two that rank, the lower median wins, and a tie keeps the incumbent (the
// one measured first). Whether only verified measurements may win is the
// caller's filter, not part of the order.
double RankingUs(const v1::Measurement& m, absl::string_view figure);
// True when a challenger at challenger_us (> 0) displaces an incumbent at
// incumbent_us (0: none yet).
bool Beats(double challenger_us, double incumbent_us);
bool Beats(const v1::Measurement& challenger, const v1::Measurement& incumbent,
           absl::string_view figure);

// Measurement.graph_note of rows stored before graph-replay timing existed
// (the store's schema step 3 writes it into every older row).
inline constexpr absl::string_view kPredatesGraphTiming =
    "measured before graph-replay timing: no graph figures";
// Measurement.graph_note of rows whose graph figures the store's schema step
// 7 set aside: the two-stream runner read the vendor's graphs slow.
#define ANVIL_GRAPH_FIGURES_WITHDRAWN                                               \
  "graph figures withdrawn: timed by the two-stream runner, whose vendor graph " \
  "times read up to 12% slow on short shapes (kept in graph_figures_before_7)"
inline constexpr absl::string_view kGraphFiguresWithdrawn = ANVIL_GRAPH_FIGURES_WITHDRAWN;
// A passed measurement taken before `figure` existed, or whose graph figures
// were withdrawn: it informs, but its (candidate, problem) pair is to be
// measured again by that figure.
bool PredatesFigure(const v1::Measurement& m, absl::string_view figure);

// How a measurement was taken, as the store and the rewards name it:
// "screen", or "full" (also for UNSPECIFIED: measurements from before
// fidelities were full).
absl::string_view FidelityName(v1::Fidelity f);

}  // namespace anvil

#endif  // ANVIL_PROTO_FIGURES_H_
