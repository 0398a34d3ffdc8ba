// The proposers a job runs, made in one place for every way a job is run:
// local `anvil optimize`, `anvil serve` on a GPU node, and `anvil serve`
// measuring on the fleet. A request's `proposer` names them:
//   "" or "embedded"  the node's proposers: the embedded search over the seed
//                     families, plus the LLM proposer when the node has an LLM
//                     endpoint configured (llm_config); what local optimize runs
//   "llm"             the LLM proposer alone (FailedPrecondition without llm_config)
//   "embedded,llm"    both, named explicitly
// Any other name is InvalidArgument. With an LLM proposer in the set, the
// job's budget is shared by the recipe bandit (bandit_policy.h), else in
// equal GPU-second shares.
// Thread-safety: the returned factory may be called from any thread (it
// copies its options into each proposer); the Store must outlive it.
#ifndef ANVIL_SERVER_PROPOSERS_FACTORY_H_
#define ANVIL_SERVER_PROPOSERS_FACTORY_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "seeds/seeds.h"
#include "server/proposer_set.h"

namespace anvil {

struct ProposerSetupOptions {
  std::vector<SeedFamily> seeds;   // REQUIRES: non-empty
  std::string llm_config;          // JSON file of an LLM endpoint (llm_proposer.h); "": none
  std::string prompts_dir;         // the prompt templates (with llm_config)
  int build_chunk = 64;            // builds per round of the embedded search (JobOptions')
  bool seeds_only = false;         // the embedded search stops after its seed stage
  std::string transfer_from;       // the embedded search's transfer source ("" : none)
};

// The factory and share policy of `options` (see the file comment).
ProposerSet MakeProposerSet(ProposerSetupOptions options);

// The seeds and prompts beside this executable (the bundle's share/anvil/),
// else $ANVIL_SEEDS_DIR / $ANVIL_PROMPTS_DIR, else the source tree's.
absl::StatusOr<std::vector<SeedFamily>> LoadDefaultSeeds();
std::string DefaultPromptsDirHere();

}  // namespace anvil

#endif  // ANVIL_SERVER_PROPOSERS_FACTORY_H_
