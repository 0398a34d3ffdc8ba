// ProblemLedger: a job's per-problem book: each problem's key (the GPU set
// once the evaluator knows it), the candidates measured on it (any job: not
// measured again), this job's tries, bests (by the one rule of
// proto/figures.h) and verified best, its plateau counter, and why it
// stopped (candidates, plateau, target). Part of JobRun (server/job_run.h).
// Thread-compatible (the job's thread).
#ifndef ANVIL_SERVER_PROBLEM_LEDGER_H_
#define ANVIL_SERVER_PROBLEM_LEDGER_H_

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "anvil/v1/kernel_search.pb.h"
#include "server/proposer.h"
#include "store/store.h"

namespace anvil {

class ProblemLedger {
 public:
  // A problem stopped taking candidates: its index and a line saying why.
  using DoneFn = std::function<void(int problem, const std::string& line)>;

  // REQUIRES: request's budget and figure complete.
  ProblemLedger(const v1::OptimizeKernelRequest& request, double plateau_gain, DoneFn done);

  // The GPU is part of every problem key: set once the evaluator knows it,
  // then the store's history of the keyed problems is read (Load).
  // Unavailable when a problem asks for another GPU.
  absl::Status SetKeys(const v1::RunnerInfo& device, Store& store, const std::string& job_id);
  bool keyed() const { return keyed_; }

  // A measurement of this run: counted as tried, taken, the status updated.
  // Returns whether it became the problem's best.
  bool Record(int p, const std::string& candidate_id, const v1::Measurement& m);

  int size() const { return static_cast<int>(views_.size()); }
  const std::vector<ProblemView>& views() const { return views_; }
  const ProblemView& view(int p) const { return views_[p]; }
  bool AnyActive() const;
  // Whether the candidate was measured on p before (any job).
  bool Measured(int p, const std::string& candidate_id) const;
  const std::string& status(int p) const { return state_[p].status; }
  // GPUs that measured the candidate on p (not re-checks): re-checks go elsewhere.
  std::vector<std::string> MeasuredBy(int p, const std::string& candidate_id) const;
  // What the job reports for p: its verified best's figures.
  v1::ProblemProgress Progress(int p) const;

 private:
  struct State {
    std::set<std::string> measured;  // candidate ids measured on it, any job
    std::set<std::string> tried;     // of which in this job (re-checks count once)
    int since_gain = 0;              // this job's candidates since its best improved
    std::string best_id;             // this job's fastest correct
    std::string verified_id;         // this job's fastest verified (reported)
    double verified_us = 0, verified_baseline_us = 0;
    std::string status;              // why it stopped; "" while active
    std::map<std::string, std::set<std::string>> measured_by;
  };
  absl::Status Load(Store& store, const std::string& job_id);
  // Takes one of this job's measurements of problem p into its bests and
  // plateau; returns whether it became the problem's best.
  bool Take(int p, const v1::Measurement& m, bool verified);
  void UpdateStatus(int p);

  const std::string figure_;
  const v1::Budget budget_;
  const double plateau_gain_;
  DoneFn done_;
  std::vector<ProblemView> views_;
  std::vector<State> state_;
  bool keyed_ = false;
};

}  // namespace anvil

#endif  // ANVIL_SERVER_PROBLEM_LEDGER_H_
