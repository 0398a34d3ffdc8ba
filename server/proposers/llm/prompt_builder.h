// The LLM proposer's prompts: the system prompt (the GPU's facts, the
// candidate ABI, the rules) and the user prompt for one problem under a
// context recipe, from the prompts/ templates and the store's history:
//   "best"        the current best source and its profile bottleneck;
//   "contrast"    also faster and slower variants of this problem with their
//                 speedups, ptxas usage, profiles and diffs against the best;
//   "neighbours"  the best of this problem and of the nearest problems of the
//                 same layout (a kernel tuned for a similar shape).
// Reads only. Thread-compatible.
#ifndef ANVIL_SERVER_PROPOSERS_LLM_PROMPT_BUILDER_H_
#define ANVIL_SERVER_PROPOSERS_LLM_PROMPT_BUILDER_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "reward/contrastive.h"
#include "server/proposer.h"

namespace anvil {

inline const std::vector<std::string>& LlmRecipes() {
  static const std::vector<std::string> r = {"contrast", "neighbours", "best"};
  return r;
}

struct BuiltPrompt {
  std::string system;
  std::string user;
  std::vector<ContrastExemplar> exemplars;  // [0]: the current best, when there is one
  std::string hint;                         // the best's bottleneck, for the record
};

class PromptBuilder {
 public:
  // REQUIRES: dir holds system.txt, task.txt, contrastive.txt, repair.txt.
  static absl::StatusOr<PromptBuilder> Load(const std::string& dir);

  absl::StatusOr<BuiltPrompt> Build(const SearchView& view, int problem, const std::string& recipe,
                                    int exemplars) const;
  // The repair turn: `failure` e.g. "did not compile", `log` the trimmed output.
  absl::StatusOr<std::string> Repair(const std::string& name, const std::string& failure,
                                     const std::string& log) const;

 private:
  absl::StatusOr<std::vector<ContrastExemplar>> Gather(const SearchView& view, int problem,
                                                      const std::string& recipe, int n) const;
  std::map<std::string, std::string> templates_;
};

// The up-to-n problems of `view` nearest to `problem` (same layout, active,
// by log distance of M, N, K), nearest first.
std::vector<int> NearestProblems(const SearchView& view, int problem, int n);

// `text` cut to its first and last max_chars/2 characters with a marker.
std::string TrimLog(const std::string& text, size_t max_chars);

}  // namespace anvil

#endif  // ANVIL_SERVER_PROPOSERS_LLM_PROMPT_BUILDER_H_
