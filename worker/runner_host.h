// RunnerHost: the host side of anvil-runner: measures built candidates on
// problems by running the runner in the sandbox, a batch of (candidate,
// problem) items per process (worker/runner/RUNNER.md). A process that ends
// early is followed by a fresh one for the items after the one it was on, so
// a candidate that crashes, hangs, floods its output, leaves a sticky CUDA
// error or changes the process's state costs only itself; after a hang, a
// flood or a library that does not load, that candidate's remaining items
// are not run and say so, since each would cost its limit again. Time limits
// scale with the problem (runner_limits.h); each Measurement reports the ones
// it ran under. Every item gets a Measurement: a runner that crashes, hangs or
// cheats yields one with the verdict and reason, never an error of the
// caller. The vendor baselines a screen timed are kept (for kScreenedMaxAge)
// and sent to later runners' screens of the problem, so each problem's
// baselines are timed about once per job, not once per process. Screens
// that name a job (MeasureSpec::keep_warm_for) go to a runner that stays up
// between batches (one per host: the job's and protocol's; RUNNER.md), so a
// batch costs no process start; a reused runner that ends before its first
// item's measurement is the process's failure, and that batch runs again in
// a fresh one.
// Thread-safe for distinct GPUs; one Measure per GPU at a time.
#ifndef ANVIL_WORKER_RUNNER_HOST_H_
#define ANVIL_WORKER_RUNNER_HOST_H_

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "anvil/v1/runner.pb.h"
#include "anvil/v1/types.pb.h"
#include "sandbox/sandbox.h"
#include "worker/runner_limits.h"
#include "worker/toolchain.h"

namespace anvil {

struct RunnerHostOptions {
  Toolchain toolchain;
  std::string scratch_dir = "/tmp";
  int device = 0;                                   // CUDA ordinal
  v1::RunnerProtocol protocol;                      // zero fields: runner defaults
  // Time and output limits of each runner, scaled with its measurements
  // (worker/runner_limits.h); the soak narrows them.
  RunnerLimits limits;
  sandbox::Isolation isolation = sandbox::Isolation::kNamespaces;  // as BuilderOptions
  bool seccomp = true;                              // runner filter after CUDA init
  int64_t memory_max_bytes = int64_t(32) << 30;     // host memory (cgroup) per runner
  std::optional<v1::Ceilings> ceilings;             // known: runners skip measuring them
};

struct RunnerResults {
  std::vector<v1::Measurement> measurements;  // [i] answers shapes[i]
  std::vector<v1::LtAlgo> tuned;              // new cuBLASLt choices to cache
  std::optional<v1::RunnerInfo> info;         // the last runner's device facts
  int runner_starts = 0;
  double seconds = 0;
};

// One candidate's problems in a batch (RunnerHost::MeasureBatch).
struct BatchEntry {
  v1::Candidate candidate;
  v1::Build build;                // REQUIRES: build.verdict() == PASSED
  std::vector<v1::Shape> shapes;  // of the candidate's layout, each measured once
};

// An item of a batch: entries[entry] on its shapes[shape].
struct BatchItem {
  size_t entry = 0;
  size_t shape = 0;
};
// The items of a batch problem by problem (in the order problems first
// appear), each problem's in the entries' order: a screen times each
// problem's baselines once per runner process.
std::vector<BatchItem> OrderByProblem(const std::vector<BatchEntry>& entries);

// How a call measures: the fidelity (UNSPECIFIED: the options' protocol as
// it is) and a screen's figure ("" = graph-cold).
struct MeasureSpec {
  v1::Fidelity fidelity = v1::FIDELITY_UNSPECIFIED;
  std::string figure;
  // Screens only: a key (the job) under which the batch may go to a runner
  // that stays up, kept for later batches of the same key and protocol.
  // "": a process of its own.
  std::string keep_warm_for;
};

// Puts a newly tuned choice in `algos`, in place of any earlier one for the same
// problem, cuBLAS version and figure (a runner uses the first that matches).
void MergeTunedAlgo(std::vector<v1::LtAlgo>& algos, v1::LtAlgo tuned);

// How long a screen's baselines stand in for timing them again: long enough
// for a job, short enough that a long-lived worker re-times them as the GPU's
// state drifts.
inline constexpr absl::Duration kScreenedMaxAge = absl::Minutes(30);

// Why a runner process ended, in a few words for the log: "done",
// "timeout", "output flood", "signal N", "sticky CUDA error", "state
// changed: <facts>" (exit 5: the facts that differed, e.g. "threads",
// "device memory in use"), or "exit N".
std::string ProcessEndReason(const sandbox::Result& r);

// A runner that stays up is replaced after this many items (its loaded
// libraries add up), once its library directory holds this much copied
// (not hard-linked: the build cache on another file system, perhaps a
// tmpfs), or when it was idle this long.
inline constexpr int kWarmRunnerItems = 1000;
inline constexpr int64_t kWarmRunnerCopiedBytes = int64_t(256) << 20;
inline constexpr absl::Duration kWarmRunnerIdle = absl::Seconds(60);

class RunnerHost {
 public:
  explicit RunnerHost(RunnerHostOptions options);
  ~RunnerHost();  // ends a runner that stays up

  // REQUIRES: build.verdict() == PASSED. `known` are cached cuBLASLt choices
  // (those marked retune are tuned again, themselves among the contenders).
  // `cancelled` (empty: never) is polled before each runner and while one
  // runs: true kills the runner and the call answers Cancelled.
  absl::StatusOr<RunnerResults> Measure(const v1::Candidate& candidate, const v1::Build& build,
                                      const std::vector<v1::Shape>& shapes,
                                      const std::vector<v1::LtAlgo>& known,
                                      const std::function<bool()>& cancelled = nullptr);
  // Measures every entry on its shapes in as few runner processes as it can:
  // one, unless a candidate ends its process early (a crash, a hang, an
  // output flood, a sticky CUDA error, or process state it changed), in which
  // case that candidate's item gets the verdict it would get alone, and the
  // items after it are measured again in a fresh process (those of a
  // candidate that hung, flooded its output or did not load are not run, and
  // say so, as Measure's). Items are sent problem by problem, so that a
  // screen times each problem's baselines once. results[i] answers
  // entries[i], measurements[j] its shapes[j].
  absl::StatusOr<std::vector<RunnerResults>> MeasureBatch(const std::vector<BatchEntry>& entries,
                                                          const MeasureSpec& spec,
                                                          const std::vector<v1::LtAlgo>& known,
                                                          const std::function<bool()>& cancelled = nullptr);
  // Ceilings given in the options or learnt from the first runner, reused by later ones.
  std::optional<v1::Ceilings> ceilings() const;
  // How many problems' screened baselines are kept for later runners.
  size_t screened_size() const;
  // Ends the runner that stays up, if any (the next keep-warm batch starts one).
  void EndWarmRunner();

 private:
  // One runner process (or one exchange with a runner that stays up):
  // what it sent and how it ended.
  struct Attempt {
    std::vector<v1::Measurement> measurements;
    std::vector<v1::LtAlgo> tuned;
    std::vector<v1::ScreenedBaselines> screened;
    std::optional<v1::RunnerInfo> info;
    sandbox::Result result;
    double limit_s = 0;        // the limit in force when the runner ended...
    std::string limit_basis;   // ...and what it was
    bool reused = false;       // a runner that stayed up from an earlier batch
    bool answered = false;     // it said the batch was done and stays up
  };
  struct BatchState;
  struct Warm;
  absl::StatusOr<Attempt> RunOnce(const v1::RunnerRequest& request, const std::function<bool()>& cancelled);
  absl::StatusOr<Attempt> RunWarm(v1::RunnerRequest request, const std::string& key,
                                  const std::function<bool()>& cancelled);
  sandbox::Spec RunnerSpec(const std::string& work_dir) const;
  void Collect(const RunnerWatch& watch, Attempt* a);
  v1::Measurement StoppedRun(const v1::Candidate& c, const v1::Shape& shape, const Attempt& a) const;
  v1::Measurement ForgedRun(const v1::Candidate& c, const v1::Shape& shape) const;
  void KeepScreened(std::vector<v1::ScreenedBaselines> got);
  // Counts a runner process's end by reason; the first of each reason is
  // logged with the runner's last words, the tally when the host ends.
  void NoteEnd(const sandbox::Result& r);
  void AddScreened(const std::vector<BatchItem>& items, const std::vector<BatchEntry>& entries,
                   const std::string& figure, v1::RunnerRequest& req) const;
  mutable absl::Mutex mu_;
  std::optional<v1::Ceilings> ceilings_ ABSL_GUARDED_BY(mu_);
  // The baselines a screen timed, per problem and figure, with when they were
  // timed: sent to later runners, which then time none (RUNNER.md).
  struct Screened {
    v1::ScreenedBaselines baselines;
    absl::Time at;
  };
  std::vector<Screened> screened_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> ends_ ABSL_GUARDED_BY(mu_);  // runner processes by end reason
  int reused_batches_ ABSL_GUARDED_BY(mu_) = 0;           // batches a runner that stayed up took
  absl::Mutex warm_mu_;
  std::unique_ptr<Warm> warm_ ABSL_GUARDED_BY(warm_mu_);
  RunnerHostOptions options_;
};

}  // namespace anvil

#endif  // ANVIL_WORKER_RUNNER_HOST_H_
