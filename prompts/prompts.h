// Prompt templates for the LLM proposer: plain text files in this folder
// (system.txt: the GPU's facts, the candidate ABI and the rules; task.txt;
// contrastive.txt; repair.txt), versioned by VERSION,
// loaded at run time, with {{name}} placeholders filled from a map. A
// template naming a placeholder the caller did not give is an error, so a
// prompt never goes out with a hole in it. Pure; thread-safe.
#ifndef ANVIL_PROMPTS_PROMPTS_H_
#define ANVIL_PROMPTS_PROMPTS_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"

namespace anvil {

// ANVIL_PROMPTS_DIR, else <exe>/../share/anvil/prompts, else the source tree's.
std::string DefaultPromptsDir(const std::string& executable_dir);
// Reads <dir>/<name>.txt.
absl::StatusOr<std::string> LoadPrompt(const std::string& dir, const std::string& name);
// The templates' version (<dir>/VERSION, one line), stored with every
// exchange: a change to any template bumps it.
absl::StatusOr<std::string> PromptsVersion(const std::string& dir);
// Replaces every {{key}}; fails naming the first placeholder without a value.
absl::StatusOr<std::string> RenderPrompt(const std::string& text,
                                         const std::map<std::string, std::string>& values);

}  // namespace anvil

#endif  // ANVIL_PROMPTS_PROMPTS_H_
