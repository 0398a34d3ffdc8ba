#include "server/rpc/local_components.h"

#include "absl/strings/str_cat.h"
#include "node/node_facts.h"
#include "worker/local_evaluator.h"

namespace anvil {

ServeComponents LocalServeComponents() {
  ServeComponents c;
  c.evaluator = [](const ServerOptions&) -> absl::StatusOr<std::unique_ptr<CandidateEvaluator>> {
    if (std::string why; node::CountGpus(&why) == 0) {
      return absl::UnavailableError(
          absl::StrCat("no CUDA device on this server (", why, "); run anvil serve on a GPU node"));
    }
    LocalEvaluatorOptions wo;
    wo.build_jobs = DefaultBuildJobs();
    absl::StatusOr<std::unique_ptr<LocalEvaluator>> e = LocalEvaluator::Create(wo);
    if (!e.ok()) return e.status();
    return std::unique_ptr<CandidateEvaluator>(*std::move(e));
  };
  return c;
}

absl::StatusOr<ProposerSetupOptions> NodeProposers(const ServerOptions& o) {
  absl::StatusOr<std::vector<SeedFamily>> seeds = LoadDefaultSeeds();
  if (!seeds.ok()) return seeds.status();
  ProposerSetupOptions p;
  p.seeds = *std::move(seeds);
  p.llm_config = o.llm_config;
  p.prompts_dir = DefaultPromptsDirHere();
  return p;
}

}  // namespace anvil
