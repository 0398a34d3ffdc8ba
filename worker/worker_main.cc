// anvil-worker: the fleet worker daemon, the same as `anvil worker`
// (worker/fleet/worker_main.h; flags: anvil-worker --help).
#include <string>
#include <vector>

#include "worker/fleet/worker_main.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return anvil::WorkerMain(args, anvil::LocalWorkerComponents(), "anvil-worker");
}
