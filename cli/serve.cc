// anvil serve: the gRPC coordinator on this node, measuring with this node's
// GPU (server/rpc/serve_main.h; options: server/CONFIG.md).
#include "cli/cli.h"
#include "server/rpc/serve_main.h"
#include "server/rpc/local_components.h"
#include "worker/fleet/worker_main.h"

namespace anvil::cli {

int RunServe(const std::vector<std::string>& args) {
  return ServeMain(args, LocalServeComponents(), "anvil serve");
}

int RunWorker(const std::vector<std::string>& args) {
  return WorkerMain(args, LocalWorkerComponents(), "anvil worker");
}

}  // namespace anvil::cli
