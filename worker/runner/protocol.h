// The runner's measurement protocol as data: its defaults, what each fidelity
// measures (MeasurePlan), and the calls a problem makes at most, which the
// worker scales the problem's time limit with. Pure functions; thread-safe.
//
// FULL (and UNSPECIFIED) takes every figure for the candidate and every
// baseline in protocol.rounds interleaved rounds. SCREEN takes what ranking
// needs: the candidate's protocol.screen_figure F and its device time (the
// audits compare against the median device call), in protocol.screen_rounds
// rounds, with every correctness and cheat check; the baselines are timed in
// F only, once per runner process and problem (RUNNER.md).
#ifndef ANVIL_WORKER_RUNNER_PROTOCOL_H_
#define ANVIL_WORKER_RUNNER_PROTOCOL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "anvil/v1/runner.pb.h"
#include "anvil/v1/types.pb.h"

namespace anvil::runner {

// Fills every zero field of p with the runner's default (screen_figure
// "graph-cold", screen_rounds 3 among them).
void FillDefaults(v1::RunnerProtocol& p);

// OK, or why p (defaults filled) cannot be measured: an unknown screen figure.
absl::Status CheckProtocol(const v1::RunnerProtocol& p);

// Which steps one problem's timing takes.
struct MeasurePlan {
  bool screen = false;
  std::string figure;   // the screen's figure; "" in a full measurement
  int rounds = 0;       // interleaved rounds over the implementations
  // Device-time samples per implementation and round: a screen whose figure
  // is not device time takes 2 (the audits need a median, not a spread).
  int device_samples = 0;
  // Minimum warm-up per implementation (ms): a screen's is 5 ms (the GPU is
  // kept busy by the batch, and the candidate is interleaved with baselines
  // timed in the same process), a full measurement's protocol.warmup_ms.
  double warmup_ms = 0;
  // The candidate's eager host figures (timing.cc HostSamples)...
  bool cold = true, warm = true, call = true;
  // ...and graph regimes (graph_timing.cc): captured, audited and replayed.
  bool graph_hot = true, graph_cold = true;
  // Whether the baselines take device-time samples: their figure, or what
  // sizes their graph replays (a replay lasts about graph_replay_us, as the
  // candidate's does, so graph figures stay comparable). The candidate
  // always does: the audits need its median device call.
  bool baseline_device = true;
  // The figure the autotuned cuBLASLt baseline is tuned by in a screen:
  // "graph-hot", "graph-cold", or "device" for the eager figures, which use
  // the device-time choice as the full measurement does.
  std::string lt_figure;
  bool Regime(bool cold_regime) const { return cold_regime ? graph_cold : graph_hot; }
};

// REQUIRES: p's defaults filled and CheckProtocol(p) OK.
MeasurePlan PlanFor(const v1::RunnerProtocol& p);

// A problem's accuracy bound on the error beyond rounding: the protocol's
// threshold, widened to 1.25x the vendors' worst error on the problem
// (`vendor_excess`): a candidate is never held to more than cuBLAS delivers
// (some of its split-K kernels exceed 3e-4 on short outputs). fp16
// accumulation is caught exactly by the large-sums probe whatever this is.
double AccuracyBound(const v1::RunnerProtocol& p, double vendor_excess);

// Whether a screen's candidate has taken graph samples enough in a regime:
// at least graph_samples of them, their replays (`per_call_us` each times
// `calls`) lasting screen_replay_us together. Never in a full measurement,
// never for the baselines (the session asks for the candidate only: the
// baselines' figures stand for the whole job).
bool ScreenHasEnoughReplays(const v1::RunnerProtocol& p, const MeasurePlan& plan,
                            const std::vector<double>& per_call_us, int calls);

// Calls of one implementation a problem makes at most after its
// ProblemStart under `plan`: warm-up, the eager timing rounds, the graph
// replays (each replay of a sample runs twice, in each regime timed, plus one
// audited replay per regime; a hot replay holds about graph_replay_us of
// calls, a cold one up to the cold sets' count rounded up), and the
// correctness, timed-output and capture checks. The worker scales the
// problem's time limit with it: keep it an upper bound when the timing
// protocol changes. `l2_bytes` sizes the cold sets as graph_timing.cc does.
int64_t PlannedCallsPerImplementation(const v1::RunnerProtocol& p, const MeasurePlan& plan,
                                      double reference_us, const v1::Shape& shape,
                                      int64_t l2_bytes);

}  // namespace anvil::runner

#endif  // ANVIL_WORKER_RUNNER_PROTOCOL_H_
