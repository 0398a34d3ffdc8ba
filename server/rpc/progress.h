// The wire form of a job event (v1::JobProgress), shared by the gRPC stream
// and local mode so both show a job the same way. Pure function; thread-safe.
#ifndef ANVIL_SERVER_RPC_PROGRESS_H_
#define ANVIL_SERVER_RPC_PROGRESS_H_

#include "anvil/v1/kernel_search.pb.h"
#include "server/job_events.h"

namespace anvil {

// event: JobEventKindName; problem_index: event.problem (-1: none).
v1::JobProgress ToProgress(const JobEvent& event);

}  // namespace anvil

#endif  // ANVIL_SERVER_RPC_PROGRESS_H_
