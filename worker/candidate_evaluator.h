// CandidateEvaluator: the coordinator's view of a GPU worker: build
// candidates (sandboxed nvcc) and measure built ones on problems (sandboxed
// runner). It knows nothing of jobs, proposers or the store: what it returns
// is persisted by the coordinator's measure callbacks (server/measure_callbacks.h).
// It lives below the server (worker/ includes nothing of server/), so that
// the worker daemon links the evaluation seam without the coordinator.
// Implementations: LocalEvaluator (worker/local_evaluator.h: this node's
// Builder and RunnerHost, local mode), RemoteEvaluator (server/fleet/: a
// fleet's workers), MeteredEvaluator (server/rpc/: counts for /metrics);
// tests/evaluator_contract.h is the suite every implementation passes.
//
// A candidate's failure is data: a compile error is an OK v1::Build with its
// verdict, a wrong answer or a crash an OK v1::Measurement with its verdict
// and reason. A non-OK status means Anvil itself failed (no toolchain, the
// sandbox could not start, the worker is gone).
//
// Every call names the job it works for and whether its work is still
// wanted (WorkContext): a fleet tags its tasks with the job, so that a
// cancelled job's queued and running work is dropped, and a run of a job
// resumed after a restart takes over the tasks its earlier run left (nothing
// is measured twice).
//
// Thread-safety: per job, one Build and up to MeasureSlots() Measure calls
// may run at once (the coordinator builds its next round while the GPU
// measures this one); never two Build calls of a job at once, nor more
// Measure calls than MeasureSlots(). Jobs may call at once. device(), MeasureSlots(), Waiting()
// and the job hooks may be called from any thread.
#ifndef ANVIL_WORKER_CANDIDATE_EVALUATOR_H_
#define ANVIL_WORKER_CANDIDATE_EVALUATOR_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "anvil/v1/runner.pb.h"
#include "anvil/v1/types.pb.h"

namespace anvil {

// Whom a call works for, and whether its work is still wanted.
struct WorkContext {
  std::string job_id;  // the job the work is for ("" outside a job: anvil eval)
  // Polled at safe points: before each build or runner process, and by the
  // sandbox while one runs. True: the work is abandoned (processes killed)
  // and what was not finished answers Cancelled. Empty: never.
  std::function<bool()> cancelled;
  bool Cancelled() const { return cancelled && cancelled(); }
  // Build calls it as each candidate's build ends, with its index and result,
  // from any thread, before Build returns (an evaluator that cannot tell
  // earlier calls it for none: Build's answer has them all). The coordinator
  // measures what is built while the rest still builds. Empty: none.
  std::function<void(size_t index, const absl::StatusOr<v1::Build>& build)> built = nullptr;
};

// One built candidate to measure on shapes of its layout.
struct MeasureRequest {
  v1::Candidate candidate;
  v1::Build build;                 // REQUIRES: build.verdict() == PASSED
  std::vector<v1::Shape> shapes;   // each measured once, in order
  // A re-check on fresh inputs in a new runner (what promotes a best to
  // verified). The evaluator measures it like any other; a fleet places it on
  // a GPU other than those in `measured_by` where it has one, so that no
  // worker's figure is believed without another's.
  bool recheck = false;
  std::vector<std::string> measured_by;  // GPU UUIDs that measured the candidate here before
  // Stored cuBLASLt choices for these shapes (the coordinator reads them from
  // the store); those marked retune are tuned again, themselves contenders.
  std::vector<v1::LtAlgo> known_lt_algos;
  // FULL: every figure, baselines beside the candidate (a re-check always is).
  // SCREEN: `figure` only (a proto/figures.h name; "" = graph-cold), fewer
  // rounds, the baselines timed once per runner process and problem; an
  // evaluator may measure several screens in one runner process (a batch).
  v1::Fidelity fidelity = v1::FIDELITY_FULL;
  std::string figure{};
};

struct MeasureResult {
  std::vector<v1::Measurement> measurements;  // [i] answers request.shapes[i]; gpu/arch set
  std::vector<v1::LtAlgo> tuned;              // new cuBLASLt choices (for the store)
  double gpu_seconds = 0;                     // runner wall time, what budgets count
};

class CandidateEvaluator {
 public:
  virtual ~CandidateEvaluator() = default;

  // Builds candidates (in parallel where the implementation can);
  // results[i] answers candidates[i].
  virtual std::vector<absl::StatusOr<v1::Build>> Build(
      const std::vector<v1::Candidate>& candidates, const WorkContext& context) = 0;

  // Measures built candidates; results[i] answers requests[i]. Every shape of
  // an OK result has a Measurement (a crash or hang yields one with its verdict).
  virtual std::vector<absl::StatusOr<MeasureResult>> Measure(
      const std::vector<MeasureRequest>& requests, const WorkContext& context) = 0;

  // A run of a job starts: work an earlier run of it left (a fleet's tasks
  // queued before a restart) waits to be taken over by this run's calls.
  virtual void JobStarting(const std::string& job_id) {}
  // A run of a job is over. ended: the job SUCCEEDED, FAILED or was
  // CANCELLED, so its work still queued or running is dropped; false: it was
  // stopped to be resumed (a drain), so its work stays for the next run.
  virtual void JobStopped(const std::string& job_id, bool ended) {}
  // Why work is not progressing now, for the job's progress ("" when it is):
  // e.g. no live GPU worker of the model in a fleet.
  virtual std::string Waiting() const { return ""; }

  // How many Measure calls may be in flight at once: one per GPU slot (a
  // fleet's live GPUs of its model), or more where the evaluator queues calls
  // for its GPUs (LocalEvaluator: two on its one GPU, the second waiting for
  // the first, so that the caller's next call is ready the moment the GPU
  // frees while the caller digests the last one). Above one, Measure must be
  // safe to call from that many threads at once.
  virtual int MeasureSlots() const { return 1; }
  // Of MeasureSlots(), how many wait for a GPU that another call holds (0:
  // each slot has a GPU of its own). The caller makes up a call for such a
  // slot late, so that it takes what has been built meanwhile.
  virtual int WaitingSlots() const { return 0; }

  // The device facts (GPU model, arch, SM count), once a runner has started;
  // nullopt before. The GPU model is part of every problem key it measures.
  virtual std::optional<v1::RunnerInfo> device() const = 0;
};

}  // namespace anvil

#endif  // ANVIL_WORKER_CANDIDATE_EVALUATOR_H_
