// RunnerLimits: how long one anvil-runner process may run, scaled with what
// it measured, and how much it may print. A runner is killed once it passes
// its current deadline, which moves with its events:
//   start           -> startup_timeout        (CUDA start-up, ceilings, candidate load)
//   info, or a problem's measurement
//                   -> setup_timeout           (allocation, baseline set-up and tuning)
//   ProblemStart    -> ProblemTimeLimit(...)   (the candidate's checks and timing)
// and never past the fixed limit startup_timeout + problems x FixedProblemLimit,
// so a candidate that prints forged events can only shorten its own run.
// ProblemTimeLimit = floor + warm-up + (candidate_calls x candidate_slowdown +
// baseline_calls) x (reference_call_us + call_overhead_us), plus
// profile_seconds when counters are profiled: a kernel as slow as
// candidate_slowdown times the slowest baseline still finishes; a hang costs
// the floor plus a few seconds, not minutes. See sandbox/SANDBOX.md.
// RunnerWatch: not thread-safe (one per runner process, on Run's thread).
#ifndef ANVIL_WORKER_RUNNER_LIMITS_H_
#define ANVIL_WORKER_RUNNER_LIMITS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "anvil/v1/runner.pb.h"

namespace anvil {

struct RunnerLimits {
  absl::Duration startup_timeout = absl::Seconds(60);  // runner start to its info event
  absl::Duration setup_timeout = absl::Seconds(30);    // to each problem's ProblemStart
  absl::Duration problem_timeout = absl::Seconds(60);  // fixed limit per problem (upper bound)
  absl::Duration floor = absl::Seconds(5);             // least a problem gets after ProblemStart
  double candidate_slowdown = 20;  // times the slowest baseline a candidate may take per call
  double call_overhead_us = 100;   // host work per call: input regeneration, checks
  double profile_seconds = 60;     // added with a counter profile (replayed passes)
  int64_t output_cap_bytes = int64_t(8) << 20;  // per stream; more ends the run (a flood)
};

// The fixed limit per problem, the upper bound of the scaled one:
// problem_timeout, plus profile_seconds with a counter profile.
absl::Duration FixedProblemLimit(const RunnerLimits& limits, bool profile);

// The limit for the candidate's checks and timing on one problem, and how it
// was derived (one line, for the measurement and a timeout's detail).
absl::Duration ProblemTimeLimit(const RunnerLimits& limits, const v1::ProblemStart& start,
                                bool profile, std::string* basis);

// Follows one runner's stdout as it arrives (sandbox::Spec::on_stdout):
// collects its events and moves its deadline as above.
class RunnerWatch {
 public:
  RunnerWatch(const RunnerLimits& limits, bool profile) : limits_(limits), profile_(profile) {}

  // Takes a piece of stdout; returns the time left from now when an event
  // moved the deadline.
  std::optional<absl::Duration> OnStdout(absl::string_view chunk);
  // Parses a last line without newline; call once the runner has ended.
  void Finish();
  // For a runner that stays up, at a later request: it has started, so the
  // first phase is set-up, not start-up.
  void Resume();
  // Whether a BatchEnd event came: the request's batch is done.
  bool batch_ended() const { return batch_ended_; }

  const std::vector<v1::RunnerEvent>& events() const { return events_; }
  // The limit in force for the phase the runner was in when it ended, and
  // what it was: "startup", "set-up" or the problem's basis.
  double current_limit_s() const { return current_s_; }
  const std::string& current_basis() const { return basis_; }
  // Per measured problem, in order: the limit it ran under.
  struct Applied {
    double limit_s = 0;
    std::string basis;
    double reference_call_us = 0;
  };
  const std::vector<Applied>& applied() const { return applied_; }

 private:
  std::optional<absl::Duration> OnLine(absl::string_view line);
  absl::Duration Phase(absl::Duration limit, std::string basis, double reference_us);

  RunnerLimits limits_;
  bool profile_ = false;
  std::string partial_;
  std::vector<v1::RunnerEvent> events_;
  double current_s_ = 0, reference_us_ = 0;
  std::string basis_;
  std::vector<Applied> applied_;
  bool batch_ended_ = false;
};

}  // namespace anvil

#endif  // ANVIL_WORKER_RUNNER_LIMITS_H_
