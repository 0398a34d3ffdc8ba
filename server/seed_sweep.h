// SeedSweep: the embedded proposer's first stage. Every seed family at its
// default knobs, compiled once and measured on every problem of its layout
// (compile once, measure many); the fastest correct kernel per problem is
// re-measured on fresh inputs in a new runner and promoted (verified) only if
// it passes again. Resumes: a candidate already measured on a problem in the
// store is not measured again. The structured search over knobs builds on
// this. Thread-compatible.
#ifndef ANVIL_SERVER_SEED_SWEEP_H_
#define ANVIL_SERVER_SEED_SWEEP_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/problem.h"
#include "seeds/seeds.h"
#include "server/local_worker.h"
#include "store/store.h"

namespace anvil {

struct SweepResult {
  std::vector<v1::ProblemProgress> problems;  // best verified per problem
  int candidates_built = 0;
  int measurements = 0;
};

// Called for every event worth showing a person.
using ProgressFn = std::function<void(const std::string& line)>;

absl::StatusOr<SweepResult> RunSeedSweep(const std::vector<SeedFamily>& seeds,
                                         const std::vector<ShapeSpec>& problems,
                                         const std::string& job_id, LocalWorker& worker,
                                         Store& store, const ProgressFn& progress);

}  // namespace anvil

#endif  // ANVIL_SERVER_SEED_SWEEP_H_
