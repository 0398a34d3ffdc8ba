// Checks on KernelSearch requests before any work is done (the JobService
// checks again what only it knows: the GPU, the request id). Pure functions; thread-safe.
#ifndef ANVIL_SERVER_RPC_REQUESTS_H_
#define ANVIL_SERVER_RPC_REQUESTS_H_

#include <string>

#include "absl/status/status.h"
#include "anvil/v1/kernel_search.pb.h"
#include "server/rpc/options.h"

namespace anvil::rpc {

// INVALID_ARGUMENT naming the first bad field: no problems or more than
// options.max_problems_per_job, a shape out of [1, 2^31-1], a layout other
// than nt/nn, a dtype other than f16_f32acc, an unknown proposer or reward
// figure, a negative budget, a request id too long or not printable ASCII.
absl::Status ValidateOptimizeRequest(const v1::OptimizeKernelRequest& request,
                                     const ServerOptions& options);
// A job id must be non-empty printable ASCII of at most 128 characters.
absl::Status ValidateJobId(const std::string& job_id);

}  // namespace anvil::rpc

#endif  // ANVIL_SERVER_RPC_REQUESTS_H_
