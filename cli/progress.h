// ProgressDisplay: what `anvil optimize` and `anvil watch` show while a job
// runs. On a terminal, a live block redrawn in place (budget used, problems
// measured, best speedup per problem so far, builds and measurements per
// minute) with the job's lines scrolling above it; elsewhere (logs, CI, a
// pipe) plain lines only, one per event, no escape codes. Conventions:
// NO_COLOR (any value) or TERM=dumb turns colour off; --quiet prints
// nothing but failures (the caller prints its summary); --verbose adds every
// measurement.
//
// It takes structured events (ProgressEvent), whoever produces them: the
// coordinator's job events (JobService::WatchJob in-process, or the
// OptimizeKernel/WatchJob stream of a server), or the store's view of a job
// (JobActivity). The proposers' notes come as the job's log events, so
// nothing else writes to stdout while the block is drawn.
//
// Thread-safety: Handle and Finish may be called from any thread; they
// serialise on an internal mutex.
#ifndef ANVIL_CLI_PROGRESS_H_
#define ANVIL_CLI_PROGRESS_H_

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "anvil/v1/kernel_search.pb.h"
#include "server/job_events.h"
#include "store/records.h"

namespace anvil::cli {

struct ProgressEvent {
  enum class Kind {
    kState,        // the job changed state (state set)
    kNewBest,      // a problem's best improved (message says which)
    kBuildFailed,  // a candidate did not build (message says why)
    kMeasured,     // one measurement (shown with --verbose only)
    kLog,          // a line for a person
    kTick,         // totals only: redraw the live block
  };
  Kind kind = Kind::kLog;
  std::string message;  // one line, no newline
  // Totals as of the event (every kind carries them).
  std::string job_id;
  std::string state = "running";
  double elapsed_s = 0;
  double budget_s = 0;  // 0: none
  int problems_total = 0;
  int problems_measured = 0;
  int64_t builds = 0, build_failures = 0, measurements = 0;
  // Where the time went: the runners' wall time (the GPU busy), and, where
  // the coordinator says (in-process jobs), its waits with the GPU idle.
  double gpu_s = 0;
  double build_wait_s = 0;     // waiting for builds, nothing to measure
  double proposer_s = 0;       // in the proposers
  bool has_waits = false;
  std::vector<std::pair<std::string, double>> best;  // problem -> best speedup so far (0: none)
};

struct DisplayOptions {
  bool live = false;    // redraw a block in place (stdout is a terminal)
  bool color = false;
  int verbosity = 1;    // 0 --quiet, 1 default, 2 --verbose
  int width = 100;      // terminal columns
};

// Options for stdout: live and coloured when it is a terminal (colour unless
// NO_COLOR is set or TERM is "dumb").
DisplayOptions StdoutDisplayOptions(bool quiet, bool verbose);

class ProgressDisplay {
 public:
  ProgressDisplay(std::ostream& out, DisplayOptions options) : out_(out), options_(options) {}
  ~ProgressDisplay() { Finish(); }

  void Handle(const ProgressEvent& event);
  // Leaves the last block on screen (live) and stops drawing.
  void Finish();

 private:
  void PrintLine(const ProgressEvent& event) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Redraw(const ProgressEvent& event) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<std::string> Block(const ProgressEvent& event) const;
  std::string Paint(const std::string& text, const char* code) const;

  std::ostream& out_;
  const DisplayOptions options_;
  absl::Mutex mu_;
  int drawn_lines_ ABSL_GUARDED_BY(mu_) = 0;  // lines of the block on screen
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

// The totals of a job as the store sees them (for a ProgressEvent).
void FillFromActivity(const JobActivity& activity, int problems_total, ProgressEvent& event);

// A job event as the server streams it (OptimizeKernel, WatchJob): its kind
// ("state", "new_best", ...), line and the job's totals. Builds are not in
// the stream; measurements are the candidates tried over the problems.
ProgressEvent FromJobProgress(const v1::JobProgress& progress, double budget_s);

// A JobService event (in-process): its kind, line (indented) and the job's
// totals from its usage (builds, failures, measurements, wall time and the
// wall budget in force).
ProgressEvent FromJobEvent(const JobEvent& event);

}  // namespace anvil::cli

#endif  // ANVIL_CLI_PROGRESS_H_
