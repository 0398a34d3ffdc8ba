// CUPTI helpers shared by the activity monitor and the counter profiler:
// result codes as absl::Status, and the current CUDA context.
#ifndef ANVIL_WORKER_RUNNER_CUPTI_UTIL_H_
#define ANVIL_WORKER_RUNNER_CUPTI_UTIL_H_

#include <cuda.h>
#include <cupti.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace anvil::runner {

// OK for CUPTI_SUCCESS; otherwise CUPTI's message for `what`. Counters closed
// to non-admin users (NVreg_RestrictProfilingToAdminUsers) are PermissionDenied.
absl::Status CuptiStatus(CUptiResult r, const char* what);

// The calling thread's current context, through the runtime's driver entry
// point (the runner links no libcuda at build time).
absl::StatusOr<CUcontext> CurrentContext();

}  // namespace anvil::runner

#endif  // ANVIL_WORKER_RUNNER_CUPTI_UTIL_H_
