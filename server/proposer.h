// Proposer: where candidates come from, behind one ask/tell interface (TVM
// MetaSchedule's SearchStrategy: GenerateMeasureCandidates /
// NotifyRunnerResults). The coordinator (server/job_service.h) asks each of a
// job's proposers for candidates with Propose, builds and measures them on the
// problems they name, persists everything, and tells the proposer what
// happened with Observe. Implementations: the embedded search over the seed
// families' knobs (server/proposers/embedded/), the LLM proposer
// (server/proposers/llm/), and test doubles (tests/).
//
// Contract:
// - Every proposal is answered by exactly one Observation, in a later
//   Observe call: measured, build failed, or skipped (with the reason: the
//   problem's budget is spent, the pair was measured before, the job stops).
//   A proposal not yet observed is pending; a proposer does not propose a
//   pending (candidate, problem) pair again.
// - Propose may return fewer than n proposals, and none while it waits for
//   observations of pending ones (the coordinator asks again after the next
//   Observe). Returning none with nothing pending means it has nothing more.
// - In the final phase (view.final_phase) the job's search budget is spent:
//   a proposer may still propose re-checks (Proposal::recheck) of what it
//   means to report, which the coordinator measures regardless of the budget.
//   Anything else it proposes then is skipped.
// - A proposer never writes the store; it reads history through the view,
//   and what it wants kept (a language-model exchange) it hands to the
//   coordinator there (SearchView::records), which keeps it through its
//   measure callbacks when the call returns.
//
// Thread-safety: a proposer is called from its job's thread only (one call
// at a time); it need not be thread-safe.
#ifndef ANVIL_SERVER_PROPOSER_H_
#define ANVIL_SERVER_PROPOSER_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "anvil/v1/runner.pb.h"
#include "anvil/v1/types.pb.h"
#include "proto/problem.h"
#include "store/records.h"

namespace anvil {

// Read-only access to what the store holds, for proposers (the coordinator
// is the store's only writer). StoreHistory (server/history.h) reads a Store.
class HistoryReader {
 public:
  virtual ~HistoryReader() = default;
  // Measurements on a problem (of one job, when given), in measured order.
  virtual absl::StatusOr<std::vector<StoredMeasurement>> SearchHistory(
      const v1::Problem& problem, const std::optional<std::string>& job_id = std::nullopt) = 0;
  // Up to n fastest and slowest PASSED candidates on a problem by `figure`.
  virtual absl::StatusOr<ExemplarSet> Exemplars(const v1::Problem& problem,
                                                const std::string& figure, int n) = 0;
  virtual absl::StatusOr<v1::Candidate> GetCandidate(const std::string& id) = 0;
  virtual absl::StatusOr<std::optional<v1::Build>> LatestBuild(const std::string& candidate_id) = 0;
  // Every stored problem on the GPU model `gpu` (none by default: a reader
  // that lists nothing offers no neighbours).
  virtual absl::StatusOr<std::vector<v1::Problem>> Problems(const std::string& gpu) {
    return std::vector<v1::Problem>();
  }
};

// One problem of a job as the coordinator sees it.
struct ProblemView {
  ShapeSpec spec;
  v1::Problem problem;       // gpu and arch set once the evaluator's device is known
  std::string name;          // "MxNxK nt"
  int tried = 0;             // candidates measured on it, every job (the store's history)
  int tried_this_job = 0;    // of which in this job, this run and earlier ones
  double best_us = 0;        // this job's fastest correct figure so far (0: none)
  double best_baseline_us = 0;
  bool active = true;        // false once its budget is spent (candidates, plateau, target)
};

// What a proposer asks the coordinator to keep: a language-model exchange it
// made (`exchange` set, its samples included) or, later, the outcome of one
// of that exchange's samples (reward, advantage, kind). `exchange_key` is the
// proposer's own name for the exchange, unique within its run; the
// coordinator maps it to the store's id.
struct ProposerRecord {
  int64_t exchange_key = 0;
  std::optional<LlmExchange> exchange;
  int sample_index = 0;  // without `exchange`: the sample `outcome` settles
  LlmSample outcome;
};

// What a proposer sees when asked. Valid for the duration of the call.
struct SearchView {
  std::string job_id;
  std::string figure;                     // what a problem's best minimises, e.g. "graph-cold"
  std::vector<ProblemView> problems;      // Proposal::problems index this
  std::optional<v1::RunnerInfo> device;   // nullopt until a runner has started
  double elapsed_seconds = 0;             // this run of the job, by the job's clock
  double budget_seconds = 0;              // this run's wall budget (0: none)
  bool final_phase = false;               // budget spent: only re-checks are measured
  HistoryReader* history = nullptr;       // never null during a call
  // A line for the job's watchers (a log event naming this proposer): stage
  // changes and other notes for a person. Set by the job; may be empty
  // where a view is made by hand (tests).
  std::function<void(const std::string&)> note;
  // Where the proposer appends what it asks to be kept, in the order made;
  // null: nothing is kept.
  std::vector<ProposerRecord>* records = nullptr;
};

// A candidate and the problems to measure it on (compile once, measure many).
struct Proposal {
  v1::Candidate candidate;       // source, params, parent_ids, proposer, family, layout
  std::vector<int> problems;     // indices into SearchView::problems, of its layout
  // Re-measure on fresh inputs in a new runner; a pass marks the measurement
  // verified (what promotes a problem's best). Measured even in the final phase.
  bool recheck = false;
  std::string stage;             // where it came from, for progress ("screen", "llm-repair")
  // How it is measured (types.proto's Fidelity): SCREEN, what ranking needs
  // at a fraction of the GPU time, or FULL, every figure. A re-check is
  // always FULL.
  v1::Fidelity fidelity = v1::FIDELITY_FULL;
  // Measured only while SearchView::elapsed_seconds is below this (0: no
  // deadline); past it the proposal is skipped. A proposer's own stage
  // budget (the embedded search keeps a share for its last stage).
  double measure_by = 0;
};

// How a proposal ended.
enum class Outcome {
  kMeasured,     // built and measured on the problems in `measured_on`
  kBuildFailed,  // build.verdict() says why; measured nowhere
  kSkipped,      // not measured (see `reason`)
};

// The answer to one proposal: its build and measurements, rewards, and ids.
struct Observation {
  Proposal proposal;
  Outcome outcome = Outcome::kSkipped;
  std::string reason;                          // why skipped, e.g. "problem budget spent"
  std::optional<v1::Build> build;              // when built
  std::vector<int> measured_on;                // problem indices actually measured, in order
  std::vector<v1::Measurement> measurements;   // [j] answers measured_on[j]
  std::vector<int64_t> measurement_ids;        // [j]: store ids
  // [j]: reward/ values by the job's figure and their kinds ("speedup" or
  // the failure's); a failed build has one, the candidate's.
  std::vector<double> rewards;
  std::vector<std::string> reward_kinds;
  // [j], re-checks only: why its figure is not believed ("" when it is): it
  // disagrees with other GPUs' figures of the candidate and agrees with none.
  std::vector<std::string> disputes;
};

class Proposer {
 public:
  virtual ~Proposer() = default;
  // Stable name, e.g. "embedded" or "llm": budgets, the share policy and
  // progress events speak of proposers by it.
  virtual const std::string& name() const = 0;
  // Up to n new proposals. A non-OK status fails the job (Anvil itself broke:
  // a store read failed); garbage from a model is not an error, it is skipped.
  virtual absl::StatusOr<std::vector<Proposal>> Propose(const SearchView& view, int n) = 0;
  // results[i] answers one earlier proposal (any order, any batch size).
  virtual void Observe(const SearchView& view, std::span<const Observation> results) = 0;
};

}  // namespace anvil

#endif  // ANVIL_SERVER_PROPOSER_H_
