#include "server/rpc/local_components.h"

#include <cuda_runtime.h>


#include "absl/strings/str_cat.h"

#include "server/local_evaluator.h"
#include "server/proposers/factory.h"
#include "spdlog/spdlog.h"

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
    wo.build_jobs = DefaultBuildJobs();
    absl::StatusOr<std::unique_ptr<LocalEvaluator>> e = LocalEvaluator::Create(wo);
    if (!e.ok()) return e.status();
    return std::unique_ptr<CandidateEvaluator>(*std::move(e));
  };
  c.proposers = [](const ServerOptions& o, Store& store) -> absl::StatusOr<ProposerSet> {
    absl::StatusOr<std::vector<SeedFamily>> seeds = LoadDefaultSeeds();
    if (!seeds.ok()) return seeds.status();
    ProposerSetupOptions p;
    p.store = &store;
    p.seeds = *std::move(seeds);
    p.llm_config = o.llm_config;
    p.prompts_dir = DefaultPromptsDirHere();
    p.build_chunk = o.build_chunk;
    p.progress = [](const std::string& line) { spdlog::info("{}", line); };
    return MakeProposerSet(std::move(p));
  };
  return c;
}

}  // namespace anvil
