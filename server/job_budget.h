// JobBudget: a job's clock and spend against its budget (proto v1::Budget):
// wall time by the service's clock (tests pass a fake) and GPU seconds, both
// added to what earlier runs of the job spent, and what was checkpointed to
// the store. Part of JobRun (server/job_run.h). Thread-compatible.
#ifndef ANVIL_SERVER_JOB_BUDGET_H_
#define ANVIL_SERVER_JOB_BUDGET_H_

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <utility>

#include "absl/strings/str_format.h"
#include "anvil/v1/kernel_search.pb.h"

namespace anvil {

class JobBudget {
 public:
  using Clock = std::chrono::steady_clock;

  JobBudget(const v1::Budget& budget, std::function<Clock::time_point()> clock)
      : budget_(budget), clock_(std::move(clock)) {}

  // This run starts.
  void Start() { start_ = Now(); }
  // Earlier runs of the job spent `wall` and `gpu` seconds.
  void SetPrior(double wall, double gpu) { prior_wall_ = wall, prior_gpu_ = gpu; }
  void AddGpu(double seconds) { gpu_ += seconds; }

  // This run's seconds, by the service's clock.
  double Elapsed() const { return std::chrono::duration<double>(Now() - start_).count(); }
  // Every run's.
  double wall() const { return prior_wall_ + Elapsed(); }
  double gpu() const { return prior_gpu_ + gpu_; }
  // This run's wall budget: what earlier runs left (0: none).
  double RunSeconds() const {
    const double w = budget_.max_wall_seconds();
    return w > 0 ? std::max(0.0, w - prior_wall_) : 0;
  }
  // Which limit is spent ("wall time 600 s", "GPU time 60 s"), "" when none.
  std::string Spent() const {
    if (budget_.max_wall_seconds() > 0 && wall() >= budget_.max_wall_seconds()) {
      return absl::StrFormat("wall time %.0f s", budget_.max_wall_seconds());
    }
    if (budget_.max_gpu_seconds() > 0 && gpu() >= budget_.max_gpu_seconds()) {
      return absl::StrFormat("GPU time %.0f s", budget_.max_gpu_seconds());
    }
    return "";
  }

  // The spend since the last checkpoint (this run's wall, GPU), marked as checkpointed.
  std::pair<double, double> TakeUncheckpointed() {
    const double wall = Elapsed();
    std::pair<double, double> d{wall - checkpointed_wall_, gpu_ - checkpointed_gpu_};
    checkpointed_wall_ = wall;
    checkpointed_gpu_ = gpu_;
    return d;
  }

 private:
  Clock::time_point Now() const { return clock_ ? clock_() : Clock::now(); }

  const v1::Budget budget_;
  const std::function<Clock::time_point()> clock_;
  double prior_wall_ = 0, prior_gpu_ = 0;  // earlier runs'
  double gpu_ = 0;                         // this run's
  double checkpointed_wall_ = 0, checkpointed_gpu_ = 0;
  Clock::time_point start_;
};

}  // namespace anvil

#endif  // ANVIL_SERVER_JOB_BUDGET_H_
