// LlmProposerFromConfig: an LLM proposer from a JSON file (llm_proposer.h).
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "server/proposers/llm/llm_proposer.h"

namespace anvil {

absl::StatusOr<std::unique_ptr<Proposer>> LlmProposerFromConfig(const std::string& path,
                                                                const std::string& prompts_dir) {
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("cannot read the LLM configuration ", path));
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("client")) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": want a JSON object with a \"client\" object"));
  }
  absl::StatusOr<llm::ClientOptions> co =
      llm::ParseClientOptions(j["client"].dump(), [](const char* name) { return std::getenv(name); });
  if (!co.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", co.status().message()));
  absl::StatusOr<std::unique_ptr<llm::Client>> client = llm::Client::Create(*co);
  if (!client.ok()) return client.status();
  LlmProposerOptions o;
  o.owned_client = std::move(*client);
  o.prompts_dir = prompts_dir;
  const nlohmann::json p = j.value("proposer", nlohmann::json::object());
  for (const auto& [key, value] : p.items()) {
    if (!value.is_number_integer()) return absl::InvalidArgumentError(absl::StrCat(path, ": \"", key, "\" is not an integer"));
    const int v = value.get<int>();
    if (key == "samples_per_prompt") o.samples_per_prompt = v;
    else if (key == "exemplars") o.exemplars = v;
    else if (key == "neighbours") o.neighbours = v;
    else if (key == "max_repairs") o.max_repairs = v;
    else if (key == "max_prompts") o.max_prompts = v;
    else return absl::InvalidArgumentError(absl::StrCat(path, ": unknown proposer option \"", key, "\""));
  }
  absl::StatusOr<std::unique_ptr<LlmProposer>> proposer = LlmProposer::Create(std::move(o));
  if (!proposer.ok()) return proposer.status();
  return std::unique_ptr<Proposer>(std::move(*proposer));
}

}  // namespace anvil
