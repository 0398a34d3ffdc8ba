// ListKernels, GetKernel: the store's winners, read on the executor.
#include "absl/strings/str_cat.h"
#include "proto/problem.h"
#include "reward/reward.h"
#include "server/rpc/requests.h"
#include "server/rpc/winners.h"
#include "server/rpc/service.h"
#include "store/store.h"

namespace anvil::rpc {

grpc::ServerUnaryReactor* KernelSearchService::ListKernels(grpc::CallbackServerContext* context,
                                                           const v1::ListKernelsRequest* request,
                                                           v1::ListKernelsResponse* response) {
  absl::Status check;
  if (request->limit() < 0 || request->limit() > 10000 || !v1::Layout_IsValid(request->layout())) {
    check = absl::InvalidArgumentError("limit must be in [0, 10000] (0: 100) and layout nt, nn or unspecified");
  } else if (!request->figure().empty() && !IsFigure(request->figure())) {
    check = absl::InvalidArgumentError("figure must be device, warm, cold or call");
  } else if (!request->job_id().empty()) {
    check = ValidateJobId(request->job_id());
  }
  return Unary(context, "ListKernels", check, [this, request, response] {
    absl::StatusOr<std::vector<v1::Kernel>> kernels = ListWinners(
        *deps_.store, request->gpu(), request->layout(),
        request->figure().empty() ? "device" : request->figure(), request->job_id(),
        request->limit() == 0 ? 100 : request->limit());
    if (!kernels.ok()) return kernels.status();
    for (v1::Kernel& k : *kernels) *response->add_kernels() = std::move(k);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* KernelSearchService::GetKernel(grpc::CallbackServerContext* context,
                                                         const v1::GetKernelRequest* request,
                                                         v1::Kernel* response) {
  absl::Status check;
  if (request->candidate_id().empty()) check = absl::InvalidArgumentError("candidate_id is empty");
  std::optional<v1::Problem> problem;
  if (check.ok() && request->has_problem()) {
    problem = request->problem();
    if (problem->dtype() == v1::DTYPE_UNSPECIFIED) problem->set_dtype(v1::DTYPE_F16_F32ACC);
    if (absl::Status st = ValidateProblem(*problem); !st.ok()) {
      check = absl::InvalidArgumentError(absl::StrCat("problem: ", st.message()));
    }
  }
  return Unary(context, "GetKernel", check, [this, request, response, problem] {
    absl::StatusOr<v1::Kernel> kernel = deps_.store->GetKernel(request->candidate_id(), problem);
    if (!kernel.ok()) return kernel.status();
    *response = *std::move(kernel);
    return absl::OkStatus();
  });
}

}  // namespace anvil::rpc
