#include "server/rpc/progress.h"

namespace anvil {

v1::JobProgress ToProgress(const JobEvent& event) {
  v1::JobProgress p;
  *p.mutable_job() = event.job;
  p.set_message(event.message);
  if (event.measurement) *p.mutable_measurement() = *event.measurement;
  p.set_event(JobEventKindName(event.kind));
  p.set_problem_index(event.problem);
  p.set_proposer(event.proposer);
  return p;
}

}  // namespace anvil
