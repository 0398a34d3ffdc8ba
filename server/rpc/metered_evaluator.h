// MeteredEvaluator: a CandidateEvaluator that counts what passes through it
// into the server's metrics (builds by outcome with their latency,
// measurements by verdict with theirs) and forwards everything unchanged.
// Thread-safety: that of the wrapped evaluator (metrics are thread-safe).
#ifndef ANVIL_SERVER_RPC_METERED_EVALUATOR_H_
#define ANVIL_SERVER_RPC_METERED_EVALUATOR_H_

#include <memory>

#include "worker/candidate_evaluator.h"
#include "server/rpc/metrics.h"

namespace anvil::rpc {

class MeteredEvaluator final : public CandidateEvaluator {
 public:
  // REQUIRES: metrics outlives this.
  MeteredEvaluator(std::unique_ptr<CandidateEvaluator> inner, ServerMetrics& metrics)
      : inner_(std::move(inner)), metrics_(metrics) {}

  std::vector<absl::StatusOr<v1::Build>> Build(const std::vector<v1::Candidate>& candidates,
                                               const WorkContext& context) override;
  std::vector<absl::StatusOr<MeasureResult>> Measure(const std::vector<MeasureRequest>& requests,
                                                     const WorkContext& context) override;
  std::optional<v1::RunnerInfo> device() const override { return inner_->device(); }
  int MeasureSlots() const override { return inner_->MeasureSlots(); }
  int WaitingSlots() const override { return inner_->WaitingSlots(); }
  void JobStarting(const std::string& job_id) override { inner_->JobStarting(job_id); }
  void JobStopped(const std::string& job_id, bool ended) override { inner_->JobStopped(job_id, ended); }
  std::string Waiting() const override { return inner_->Waiting(); }

 private:
  std::unique_ptr<CandidateEvaluator> inner_;
  ServerMetrics& metrics_;
};

}  // namespace anvil::rpc

#endif  // ANVIL_SERVER_RPC_METERED_EVALUATOR_H_
