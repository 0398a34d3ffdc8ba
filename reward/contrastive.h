// Contrastive feedback for the LLM proposer (CUDA-L1's contrastive RL):
// measured kernels side by side -- the current best and variants that were
// faster and slower, each with its speedup (figure and regime named), ptxas
// usage and profile bottleneck -- and a diff between each and the best, so a
// model can reason about what made the faster ones faster. The exemplars are
// chosen by the caller (the proposer reads them from the store); this turns
// them into prompt text. Pure; thread-safe.
#ifndef ANVIL_REWARD_CONTRASTIVE_H_
#define ANVIL_REWARD_CONTRASTIVE_H_

#include <string>
#include <vector>

#include "anvil/v1/types.pb.h"

namespace anvil {

struct ContrastExemplar {
  v1::Candidate candidate;
  v1::Measurement measurement;        // PASSED, with baselines and profile
  std::vector<v1::KernelUsage> usage;  // ptxas report of its build (may be empty)
  std::string problem_name;           // "4096x4096x4096 nt" (a neighbour may differ)
};

// Speedup over the fastest baseline by `figure` (0 when it cannot be told).
double ExemplarSpeedup(const v1::Measurement& m, const std::string& figure);

// A unified diff (---/+++/@@ hunks, `context` lines around changes) from
// `from` to `to`, cut after max_lines lines with a note. Empty when equal.
std::string UnifiedDiff(const std::string& from, const std::string& to, const std::string& from_name,
                        const std::string& to_name, int context = 2, int max_lines = 120);

// The prompt section. exemplars[0] is the current best; the others are
// shown fastest first, each with its numbers and its diff against the best.
// Empty when there are no exemplars.
std::string RenderContrast(const std::vector<ContrastExemplar>& exemplars, const std::string& figure);

}  // namespace anvil

#endif  // ANVIL_REWARD_CONTRASTIVE_H_
