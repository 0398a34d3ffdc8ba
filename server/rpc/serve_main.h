// ServeMain: the whole life of `anvil serve` / `anvil-server`: read the
// options (TOML file, environment, flags: server/CONFIG.md), open the store,
// make the evaluator and the JobService, serve, and on SIGTERM or SIGINT
// drain (NOT_SERVING at once, jobs checkpointed) and return 0 within
// server.drain_seconds. The evaluator and proposers come from the caller:
// the real ones for the shipped binaries, test doubles for tests.
// Call it from main() before starting any thread (it blocks SIGTERM and
// SIGINT in every thread and waits for them on its own).
#ifndef ANVIL_SERVER_RPC_SERVE_MAIN_H_
#define ANVIL_SERVER_RPC_SERVE_MAIN_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/candidate_evaluator.h"
#include "server/job_service.h"
#include "server/rpc/options.h"
#include "store/store.h"

namespace anvil {

struct ServeComponents {
  // This node's evaluator; an error (no GPU here) leaves the server up with
  // OptimizeKernel answering UNAVAILABLE and the error's message.
  std::function<absl::StatusOr<std::unique_ptr<CandidateEvaluator>>(const ServerOptions&)> evaluator;
  // The jobs' proposers and the policy sharing a job's budget among them,
  // made once the options are read and the store is open. Empty (the
  // shipped binaries): this node's, as local `anvil optimize` runs
  // (server/proposers/factory.h: the bundle's seeds, jobs.llm_config). An
  // error leaves the server down (exit 1).
  std::function<absl::StatusOr<ProposerSet>(const ServerOptions&, Store&)> proposers;
  // The GPU model the evaluator measures on, when known before its first
  // runner starts ("" : learnt from the evaluator's device()).
  std::string gpu;
};

// args: the command line after the program (or subcommand) name. Returns the
// process exit code: 0 after a drain, 2 for bad options, 4 for an unusable
// store, 3 when the port cannot be bound.
int ServeMain(const std::vector<std::string>& args, const ServeComponents& components,
              const std::string& program = "anvil serve");

}  // namespace anvil

#endif  // ANVIL_SERVER_RPC_SERVE_MAIN_H_
