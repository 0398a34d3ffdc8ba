// What a soak found: per kind of job, the verdicts against what was expected
// and the wall time per job; recovery after hangs and crashes; device memory
// before, after each hostile job and at the end; leftovers (processes,
// scratch entries, descriptors, job cgroups); the sandbox's own overhead.
// Printed as markdown tables for a person and as JSON for the record.
// Plain data; thread-compatible.
#ifndef ANVIL_TOOLS_SOAK_REPORT_H_
#define ANVIL_TOOLS_SOAK_REPORT_H_

#include <map>
#include <string>
#include <vector>

#include "tools/soak/plan.h"

namespace anvil {

struct Summary {
  int n = 0;
  double min = 0, median = 0, max = 0;
};
Summary Summarize(std::vector<double> values);

struct KindResult {
  std::string kind;      // "build", "eval", "adversarial/infinite_loop", ...
  std::string expected;  // "PASSED", "TIMEOUT timeout", "REJECTED (source policy)"
  int jobs = 0;
  int as_expected = 0;
  std::vector<double> wall_s;           // one per job
  std::map<std::string, int> observed;  // "TIMEOUT timeout" -> count
};

// A hang or crash, then the next PASSED measurement on the same GPU.
struct RecoverySample {
  std::string after;     // the fixture that hung or crashed
  std::string verdict;   // what it got: TIMEOUT or CRASHED
  double failed_s = 0;   // its evaluation's wall time, runner killed and reaped at the end
  double kill_s = 0;     // TIMEOUT: time beyond the wall limit to kill and reap the runner
  double total_s = 0;    // end of the failed evaluation -> next PASSED measurement done
  double restart_s = 0;  // of total: sandbox, process and CUDA start-up (total - measurement)
  double startup_s = 0;  // of restart: the runner's own start-up (RunnerInfo.startup_seconds)
  double measurement_s = 0;  // of total: the first measurement itself
};

struct MemoryReport {
  std::string source;  // "cudaMemGetInfo" / "nvidia-smi"; empty when not watched
  double slack_mib = 0;
  double before_mib = 0, end_mib = 0;   // used on the device, no runner alive
  std::vector<double> after_hostile_mib;  // used - before, after each hostile job settled
  std::vector<double> settle_s;           // time each took to come back within the slack
  int not_returned = 0;                   // hostile jobs after which it never came back
};

struct LeakReport {
  std::string scratch_dir;  // parent of every build and run scratch directory
  int scratch_before = 0, scratch_after = 0;
  std::vector<std::string> fds_before, fds_after;  // the soak's own descriptors
  std::vector<std::string> processes;  // ours, left over: "pid uid state comm: cmdline"
  std::vector<std::string> suspects;   // of the sandbox uid or runners, not shown to be ours
  std::vector<std::string> cgroups;    // job cgroups not removed
  // No process or cgroup left, as many scratch entries as before, no
  // descriptor that was not open before.
  bool ok() const;
};

// The same build and the same run with and without namespaces (bubblewrap).
struct OverheadReport {
  int reps = 0;
  std::string note;  // why a figure is missing or not what it says
  std::vector<double> build_none_ms, build_ns_ms;
  std::vector<double> eval_none_ms, eval_ns_ms;
  std::vector<double> startup_none_ms, startup_ns_ms;  // the runner's own start-up inside
};

struct SoakReport {
  bool cpu_only = false;                // builds only: no GPU lane, no device memory
  std::string gpu, gpu_uuid, versions;  // from the runner
  std::string sandbox;                  // what the node allows: namespaces, cgroups
  JobMix mix;
  int build_jobs = 0;
  double startup_timeout_s = 0, problem_timeout_s = 0;
  int jobs_done = 0;
  bool stopped_early = false;  // --max-seconds reached
  double setup_s = 0, soak_s = 0;
  std::vector<KindResult> kinds;
  std::vector<std::string> unexpected;  // one line per job that did not get its verdict
  std::vector<RecoverySample> recovery;
  MemoryReport memory;
  LeakReport leaks;
  OverheadReport overhead;

  // Every job ran and got its verdict; nothing leaked; memory came back.
  bool ok() const;
};

std::string FormatReport(const SoakReport& r);  // markdown
std::string ReportJson(const SoakReport& r);    // one JSON object, indented

}  // namespace anvil

#endif  // ANVIL_TOOLS_SOAK_REPORT_H_
