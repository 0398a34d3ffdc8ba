// Kernel extraction from a model's answer: the fenced code blocks (``` or
// ~~~, any info string, several per answer, an unterminated last fence when
// the answer was cut off, a whole answer that is bare source), each checked
// against the candidate ABI and the source policy before any nvcc time is
// spent, and deduplicated by the hash of the normalised source.
// Thread-compatible (an Extractor remembers the hashes it has seen).
#ifndef ANVIL_SERVER_PROPOSERS_LLM_EXTRACT_H_
#define ANVIL_SERVER_PROPOSERS_LLM_EXTRACT_H_

#include <set>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "sandbox/sandbox.h"

namespace anvil {

// The code blocks of a markdown answer, in order (fence lines removed).
std::vector<std::string> FencedBlocks(absl::string_view text);

// Why `source` does not export the candidate ABI (anvil_gemm and
// anvil_workspace_bytes, defined with C linkage); empty when it does.
std::string AbiProblem(absl::string_view source);

struct ExtractedKernel {
  std::string source;
  std::string hash;  // hex SHA-256 of the normalised source
};

struct Extraction {
  std::vector<ExtractedKernel> kernels;  // accepted, new
  // Why nothing (or not everything) was accepted: "no_code", "abi",
  // "policy", "duplicate", with the reason, one per refused block.
  std::vector<std::pair<std::string, std::string>> refused;
  std::string prose;  // the text outside code blocks (the model's reasoning)
};

class Extractor {
 public:
  explicit Extractor(sandbox::SourcePolicy policy, int max_per_answer = 2)
      : policy_(std::move(policy)), max_per_answer_(max_per_answer) {}
  // Blocks without anvil_gemm (snippets, shell lines) are skipped silently
  // when another block has it. A refused or accepted hash is remembered.
  Extraction Extract(absl::string_view answer);
  void Remember(const std::string& hash) { seen_.insert(hash); }

 private:
  sandbox::SourcePolicy policy_;
  int max_per_answer_;
  std::set<std::string> seen_;
};

}  // namespace anvil

#endif  // ANVIL_SERVER_PROPOSERS_LLM_EXTRACT_H_
