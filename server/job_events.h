// Job events: what a running job tells its watchers (the CLI's progress
// lines, the gRPC OptimizeKernel/WatchJob streams, metrics). Each event says
// where the budget went: per proposer and per problem. Plain value types.
#ifndef ANVIL_SERVER_JOB_EVENTS_H_
#define ANVIL_SERVER_JOB_EVENTS_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "anvil/v1/kernel_search.pb.h"
#include "anvil/v1/types.pb.h"

namespace anvil {

// What one proposer has spent in this job (all runs, restarts included).
struct ProposerUsage {
  int proposed = 0;            // proposals made
  int built = 0;               // of which built (cache hits included)
  int build_failures = 0;
  int measurements = 0;        // (candidate, problem) pairs measured
  double gpu_seconds = 0;      // runner time spent on its candidates
  int improvements = 0;        // times one of its candidates became a problem's best
};

// Where this run's wall time went on the job's thread, by the real steady
// clock (not the service's budget clock): waiting on the evaluator (builds
// and measurements; of which waiting for builds with nothing to measure, the
// GPU idle), in the proposers (Propose, Observe), and the rest: the
// coordinator's own overhead (scheduling, precheck, store writes, rewards,
// progress events). `candidates`: sent to the evaluator (measured, or failed
// to build).
struct CoordinatorTime {
  double wall_seconds = 0;
  double evaluator_seconds = 0;
  double build_wait_seconds = 0;
  double proposer_seconds = 0;
  int candidates = 0;
  double overhead_seconds() const { return wall_seconds - evaluator_seconds - proposer_seconds; }
  // Overhead per candidate (ms); 0 before the first candidate.
  double overhead_ms_per_candidate() const {
    return candidates > 0 ? 1000 * overhead_seconds() / candidates : 0;
  }
};

// The job's spend against its budget (proto Budget), at the time of the event.
struct BudgetUsage {
  double wall_seconds = 0;             // the job's wall time, every run summed
  double gpu_seconds = 0;
  int candidates = 0;                  // (candidate, problem) pairs measured in this job
  std::map<std::string, ProposerUsage> by_proposer;
  double max_wall_seconds = 0;         // the limits in force (0: none)
  double max_gpu_seconds = 0;
  CoordinatorTime coordinator;         // this run's (a resumed job starts again)
};

enum class JobEventKind {
  kState,        // the job changed state (queued, running, succeeded, failed, cancelled)
  kMeasured,     // a candidate was measured on a problem (measurement set)
  kBuildFailed,  // a candidate did not build (message says why)
  kNewBest,      // a problem's best improved (measurement set)
  kProblemDone,  // a problem stopped: its budget, plateau or target (message says which)
  kLog,          // a line for a person (stage changes, the proposers' notes)
};

struct JobEvent {
  JobEventKind kind = JobEventKind::kLog;
  v1::Job job;                                   // the job as of this event
  std::string message;                           // one line for a person, no newline
  std::string proposer;                          // the proposer concerned, if any
  std::string stage;                             // the proposal's stage ("screen", "llm-repair"), if any
  int problem = -1;                              // index into the job's problems, if any
  std::optional<v1::Measurement> measurement;
  BudgetUsage usage;
};

// "state", "measured", "build_failed", "new_best", "problem_done", "log".
const char* JobEventKindName(JobEventKind kind);

}  // namespace anvil

#endif  // ANVIL_SERVER_JOB_EVENTS_H_
