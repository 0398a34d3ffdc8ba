#include "server/proposers/factory.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/ascii.h"
#include "deploy/layout.h"
#include "prompts/prompts.h"
#include "server/proposers/embedded/embedded_proposer.h"
#include "server/proposers/llm/bandit_policy.h"
#include "server/proposers/llm/llm_proposer.h"

namespace anvil {
namespace {

struct Names {
  bool embedded = false;
  bool llm = false;
};

absl::StatusOr<Names> ParseNames(const std::string& proposer, bool have_llm) {
  Names n;
  if (proposer.empty() || proposer == "embedded") {  // the node's proposers
    n.embedded = true;
    n.llm = have_llm;
    return n;
  }
  for (absl::string_view name : absl::StrSplit(proposer, ',')) {
    name = absl::StripAsciiWhitespace(name);
    if (name == "embedded") {
      n.embedded = true;
    } else if (name == "llm") {
      n.llm = true;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown proposer '", name, "' (embedded, llm, or both comma-separated)"));
    }
  }
  if (n.llm && !have_llm) {
    return absl::FailedPreconditionError(
        "the request names the llm proposer but no LLM endpoint is configured here "
        "(anvil optimize --llm FILE; anvil serve: jobs.llm_config)");
  }
  return n;
}

std::unique_ptr<Proposer> Embedded(const ProposerSetupOptions& o, const v1::OptimizeKernelRequest& r) {
  EmbeddedProposerOptions e;
  e.seeds = o.seeds;
  e.search.budget_seconds = r.budget().max_wall_seconds();
  e.search.seeds_only = o.seeds_only;
  e.search.transfer_from = o.transfer_from;
  e.search.figure = r.reward_figure();
  e.search.build_chunk = o.build_chunk;
  return std::make_unique<EmbeddedProposer>(std::move(e));
}

}  // namespace

ProposerSet MakeProposerSet(ProposerSetupOptions options) {
  ProposerSet set;
  const bool have_llm = !options.llm_config.empty();
  auto o = std::make_shared<const ProposerSetupOptions>(std::move(options));
  set.factory = [o, have_llm](const v1::OptimizeKernelRequest& request)
      -> absl::StatusOr<std::vector<std::unique_ptr<Proposer>>> {
    absl::StatusOr<Names> names = ParseNames(request.proposer(), have_llm);
    if (!names.ok()) return names.status();
    if (names->embedded && o->seeds.empty()) {
      return absl::FailedPreconditionError("no seed families loaded: the embedded proposer has nothing to search");
    }
    std::vector<std::unique_ptr<Proposer>> out;
    if (names->embedded) out.push_back(Embedded(*o, request));
    if (names->llm) {
      absl::StatusOr<std::unique_ptr<Proposer>> llm = LlmProposerFromConfig(o->llm_config, o->prompts_dir);
      if (!llm.ok()) return llm.status();
      out.push_back(*std::move(llm));
    }
    return out;
  };
  // With a model beside the embedded search, the budget follows what pays.
  if (have_llm) set.share_policy = [] { return MakeBanditSharePolicy(); };
  return set;
}

absl::StatusOr<std::vector<SeedFamily>> LoadDefaultSeeds() {
  return LoadSeeds(DefaultSeedsDir(deploy::ExecutableDir()));
}

std::string DefaultPromptsDirHere() { return DefaultPromptsDir(deploy::ExecutableDir()); }

}  // namespace anvil
