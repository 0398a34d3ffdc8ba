// Measure callbacks: everything that persists or reacts to a measured round
// (MetaSchedule's MeasureCallback). The coordinator runs them in order after
// each round, on the job's thread, before the proposers observe it:
//   CrossCheckCallback  a re-check measured on another GPU than the original
//                     (a fleet) is believed only where its figure agrees with
//                     another worker's; disagreements are evidence against
//                     the workers involved (Store::RecordEvidence)
//   StoreCallback     the store: candidates, builds, measurements, verified
//                     marks (not of disputed re-checks), tuned cuBLASLt
//                     choices (the only writer)
//   ExchangeCallback  the proposers' records (MeasuredRound::records): LLM
//                     exchanges with their samples, and the samples' outcomes
//   RewardCallback    reward/: each measurement's reward by the job's figure,
//                     stored and handed to the proposers in Observation::rewards
//   ProgressCallback  progress events (JobEvent) to the job's watchers
// (the embedded proposer's cost model observes through Proposer::Observe).
// What a proposer hands over in SearchView::records comes as a round of its
// own (no observations) when the proposer's call returns.
// Thread-compatible: a callback list belongs to one job.
#ifndef ANVIL_SERVER_MEASURE_CALLBACKS_H_
#define ANVIL_SERVER_MEASURE_CALLBACKS_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "server/job_events.h"
#include "server/proposer.h"
#include "store/store.h"

namespace anvil {

// One measured round of a job: observations[i] answers one proposal.
// Callbacks may fill in ids and rewards (the store's, reward/'s).
struct MeasuredRound {
  std::string job_id;
  std::string figure;
  const std::vector<ProblemView>* problems = nullptr;  // the job's problems (keys set)
  std::vector<Observation>* observations = nullptr;
  std::vector<v1::LtAlgo> tuned;                 // new cuBLASLt choices from the round
  std::vector<ProposerRecord> records;           // what the proposers asked to keep, in order
};

class MeasureCallback {
 public:
  virtual ~MeasureCallback() = default;
  // A non-OK status stops the job (FAILED); what earlier callbacks stored stays.
  virtual absl::Status Apply(MeasuredRound& round) = 0;
};

// Checks each passed re-check measured by a fleet worker against this job's
// measurements of the same candidate and problem by other GPUs: one that
// differs by more than `tolerance` (a fraction, by the job's figure) from
// some and agrees with none is disputed (Observation::disputes), and each
// disagreement is recorded against both workers; `quarantine_after`
// disagreements with two or more others quarantine a worker.
std::unique_ptr<MeasureCallback> MakeCrossCheckCallback(Store& store, double tolerance, int quarantine_after);
// Writes the round: each candidate, its build, its measurements (with the
// job id; ids into Observation::measurement_ids), the verified mark of a
// passed re-check that is not disputed, and the tuned cuBLASLt choices.
// REQUIRES: store outlives it.
std::unique_ptr<MeasureCallback> MakeStoreCallback(Store& store);
// Keeps the round's proposer records: each exchange with its samples
// (Store::PutLlmExchange), then its samples' outcomes
// (Store::SetLlmSampleOutcome); an outcome of an exchange it did not keep is
// dropped. REQUIRES: store outlives it; one per job run (keys are a run's).
std::unique_ptr<MeasureCallback> MakeExchangeCallback(Store& store);
// Computes each measurement's reward, and a failed build's
// (Observation::rewards, reward_kinds), and stores it.
std::unique_ptr<MeasureCallback> MakeRewardCallback(Store& store);
// Emits a kMeasured event per measurement (and kNewBest when a problem's best
// improves) through `emit`.
std::unique_ptr<MeasureCallback> MakeProgressCallback(std::function<void(JobEvent)> emit);

}  // namespace anvil

#endif  // ANVIL_SERVER_MEASURE_CALLBACKS_H_
