// ReplayTrace: where a graph replay's time per call goes, from the CUPTI
// kernel records of one watched replay: each kernel's duration, and the gap
// from one kernel's end to the next one's start (negative where they overlap,
// as under programmatic dependent launch). For a call of one kernel the
// replay's figure is about kernel + gap; a call of several kernels (a split-K
// reduction) has as many per call. When two timers disagree on a figure, this
// says whether the kernels ran slower or the launches stood further apart.
#ifndef ANVIL_WORKER_RUNNER_REPLAY_TRACE_H_
#define ANVIL_WORKER_RUNNER_REPLAY_TRACE_H_

#include <string>
#include <vector>

#include "worker/runner/cupti_monitor.h"

namespace anvil::runner {

struct ReplayTrace {
  int kernels = 0;         // kernel records seen
  double kernel_us = 0;    // median kernel duration
  double gap_us = 0;       // median start-to-previous-end gap between consecutive kernels
  double span_us = 0;      // (last end - first start) / kernels: the wall time per kernel
};

// Kernel records only (memsets and copies are ignored), in start order. Fewer
// than two kernels: gap 0.
ReplayTrace SummariseReplay(std::vector<Activity> acts);

}  // namespace anvil::runner

#endif  // ANVIL_WORKER_RUNNER_REPLAY_TRACE_H_
