#include "worker/runner/cupti_util.h"

#include <cuda_runtime.h>

#include "absl/strings/str_cat.h"

namespace anvil::runner {

absl::Status CuptiStatus(CUptiResult r, const char* what) {
  if (r == CUPTI_SUCCESS) return absl::OkStatus();
  const char* msg = "?";
  cuptiGetResultString(r, &msg);
  if (r == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES) {
    return absl::PermissionDeniedError(
        absl::StrCat("CUPTI ", what, ": ", msg,
                     " (GPU counters are restricted to admin users on this node: "
                     "NVreg_RestrictProfilingToAdminUsers)"));
  }
  return absl::InternalError(absl::StrCat("CUPTI ", what, ": ", msg));
}

absl::StatusOr<CUcontext> CurrentContext() {
  using GetCurrent = CUresult (*)(CUcontext*);
  static const GetCurrent get_current = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &fn, 12000, cudaEnableDefault, &q) !=
            cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      fn = nullptr;
    return reinterpret_cast<GetCurrent>(fn);
  }();
  if (get_current == nullptr)
    return absl::InternalError("cuCtxGetCurrent is not available from the driver");
  CUcontext ctx = nullptr;
  if (get_current(&ctx) != CUDA_SUCCESS || ctx == nullptr)
    return absl::FailedPreconditionError("no current CUDA context");
  return ctx;
}

}  // namespace anvil::runner
