#include "server/rpc/local_components.h"

#include <cuda_runtime.h>

#include <thread>

#include "absl/strings/str_cat.h"

#include "server/local_evaluator.h"

namespace anvil {

ServeComponents LocalServeComponents() {
  ServeComponents c;
  c.evaluator = [](const ServerOptions&) -> absl::StatusOr<std::unique_ptr<CandidateEvaluator>> {
    int gpus = 0;
    if (cudaError_t err = cudaGetDeviceCount(&gpus); err != cudaSuccess || gpus == 0) {
      return absl::UnavailableError(absl::StrCat(
          "no CUDA device on this server (", err == cudaSuccess ? "none found" : cudaGetErrorString(err),
          "); run anvil serve on a GPU node"));
    }
    LocalEvaluatorOptions wo;
    wo.build_jobs = std::max(1, static_cast<int>(std::thread::hardware_concurrency() / 2));
    absl::StatusOr<std::unique_ptr<LocalEvaluator>> e = LocalEvaluator::Create(wo);
    if (!e.ok()) return e.status();
    return std::unique_ptr<CandidateEvaluator>(*std::move(e));
  };
  c.proposers = [](const v1::OptimizeKernelRequest&)
      -> absl::StatusOr<std::vector<std::unique_ptr<Proposer>>> {
    return absl::UnimplementedError("the embedded proposer is not wired into anvil serve yet");
  };
  return c;
}

}  // namespace anvil
