// MakeJobService: the one place a JobService is assembled, for every way a
// job is run: local `anvil optimize` (cli/optimize.cc), `anvil serve` with
// this node's GPU or the fleet's (server/rpc/serve_main.cc) and the tests'
// services (the search tests' RunSearch, the scripted LLM job). The JobOptions come
// from ServerOptions in both modes (JobOptionsOf, server/rpc/options.h), so
// local and served jobs run alike; the proposers are the node's
// (factory.h) unless a set is given.
#ifndef ANVIL_SERVER_PROPOSERS_JOB_SETUP_H_
#define ANVIL_SERVER_PROPOSERS_JOB_SETUP_H_

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "server/job_options.h"
#include "server/job_service.h"
#include "server/proposer_set.h"
#include "server/proposers/factory.h"
#include "store/store.h"
#include "worker/candidate_evaluator.h"

namespace anvil {

struct JobSetup {
  Store* store = nullptr;                   // REQUIRES: non-null, outlives the service
  CandidateEvaluator* evaluator = nullptr;  // REQUIRES: non-null, outlives the service
  JobOptions job;
  // The node's proposers (factory.h); their build chunk is job.build_chunk.
  ProposerSetupOptions proposers;
  // Instead of the node's proposers: a set made elsewhere (tests' doubles).
  std::optional<ProposerSet> proposer_set;
  std::function<std::chrono::steady_clock::time_point()> clock;  // empty: steady_clock
  std::function<std::string()> new_job_id;                       // empty: "job-<unix ns>"
};

absl::StatusOr<std::unique_ptr<JobService>> MakeJobService(JobSetup setup);

}  // namespace anvil

#endif  // ANVIL_SERVER_PROPOSERS_JOB_SETUP_H_
