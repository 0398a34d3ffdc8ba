// ScriptedJob: one LLM-proposer job whose model is ScriptedLlmServer serving
// KernelAnswer (scripted_kernels.h), on any CandidateEvaluator: the real
// LocalEvaluator in llm_gpu_test, a verdict-by-source test double in
// scripted_kernels_test, so the script's sequencing (samples, repairs,
// prompts) is checked on the CPU before GPU time is spent. Test code.
#ifndef ANVIL_TESTS_SCRIPTED_JOB_H_
#define ANVIL_TESTS_SCRIPTED_JOB_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/candidate_evaluator.h"
#include "store/store.h"

namespace anvil::testing {

struct ScriptedJobOutcome {
  v1::Job job;                          // as RunJob returned it
  std::map<std::string, int> kinds;     // "<status>/<reward_kind>" -> samples
  std::map<std::string, int> statuses;  // sample status -> samples
  int exchanges = 0;
  // A repair turn named an INCORRECT verdict, its problem and the runner's reason.
  bool incorrect_repaired = false;
  // Every incorrect or cheat sample has a negative reward.
  bool failures_penalised = true;
};

// Runs the job on `shapes` (nt) with samples_per_prompt 5 (one per scripted
// choice) and max_prompts 12. REQUIRES: store and evaluator outlive the call.
absl::StatusOr<ScriptedJobOutcome> RunScriptedJob(Store& store, CandidateEvaluator& evaluator,
                                                  const std::vector<v1::Shape>& shapes);

}  // namespace anvil::testing

#endif  // ANVIL_TESTS_SCRIPTED_JOB_H_
