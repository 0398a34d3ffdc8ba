// WorkerMain: the whole life of `anvil worker` / `anvil-worker`: parse the
// flags, run a FleetWorker until SIGTERM or SIGINT (the slots finish and
// report the task in hand), return the exit code. The GPUs and evaluators
// come from the caller: this node's (LocalWorkerComponents) for the shipped
// binaries, test doubles for tests. Call it from main() before any thread.
#ifndef ANVIL_WORKER_FLEET_WORKER_MAIN_H_
#define ANVIL_WORKER_FLEET_WORKER_MAIN_H_

#include <string>
#include <vector>

#include "worker/fleet/fleet_worker.h"

namespace anvil {

// args: the command line after the program (or subcommand) name. Exit codes:
// 0 after a signal, 2 for bad flags, 3 when the server refuses or is
// unreachable, 4 when this node cannot work (no GPU, no toolchain, no
// namespace isolation, a directory the sandbox's uid cannot reach).
int WorkerMain(const std::vector<std::string>& args, const FleetWorkerComponents& components,
               const std::string& program = "anvil worker");

// This node's GPUs (CUDA runtime) and LocalEvaluators pinned to them (the
// sandboxed builder and runner); build slots get a builder-only evaluator.
FleetWorkerComponents LocalWorkerComponents();

}  // namespace anvil

#endif  // ANVIL_WORKER_FLEET_WORKER_MAIN_H_
