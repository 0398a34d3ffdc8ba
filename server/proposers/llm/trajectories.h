// Trajectory export: a job's LLM samples as JSON Lines for RL fine-tuning,
// one line per sample with a reward (format: TRAJECTORIES.md; TRL's
// conversational prompt-completion shape with reward and advantage fields,
// which OpenRLHF and verl also read). Reads the store only. Thread-safe as
// Store is.
#ifndef ANVIL_SERVER_PROPOSERS_LLM_TRAJECTORIES_H_
#define ANVIL_SERVER_PROPOSERS_LLM_TRAJECTORIES_H_

#include <ostream>
#include <string>

#include "absl/status/statusor.h"
#include "store/store.h"

namespace anvil {

struct TrajectoryCounts {
  int exchanges = 0;
  int written = 0;     // samples with a reward
  int unrewarded = 0;  // samples never measured (job stopped first, skipped): left out
};

// Writes the job's samples to `out`. NotFound for an unknown job.
absl::StatusOr<TrajectoryCounts> WriteTrajectories(Store& store, const std::string& job_id,
                                                   std::ostream& out);

}  // namespace anvil

#endif  // ANVIL_SERVER_PROPOSERS_LLM_TRAJECTORIES_H_
