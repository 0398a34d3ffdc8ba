#include "server/proposers/job_setup.h"

#include <utility>

namespace anvil {

absl::StatusOr<std::unique_ptr<JobService>> MakeJobService(JobSetup setup) {
  if (setup.store == nullptr || setup.evaluator == nullptr) {
    return absl::InvalidArgumentError("a job service needs a store and an evaluator");
  }
  ProposerSet set;
  if (setup.proposer_set.has_value()) {
    set = *std::move(setup.proposer_set);
  } else {
    setup.proposers.build_chunk = setup.job.build_chunk;
    set = MakeProposerSet(std::move(setup.proposers));
  }
  JobServiceOptions o;
  static_cast<JobOptions&>(o) = setup.job;
  o.store = setup.store;
  o.evaluator = setup.evaluator;
  o.proposers = std::move(set.factory);
  o.share_policy = std::move(set.share_policy);
  o.clock = std::move(setup.clock);
  o.new_job_id = std::move(setup.new_job_id);
  return JobService::Create(std::move(o));
}

}  // namespace anvil
