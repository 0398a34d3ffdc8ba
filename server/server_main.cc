// anvil-server: the gRPC coordinator, the same as `anvil serve` (the
// KernelSearch service over this node's GPU; options: server/CONFIG.md).
#include <string>
#include <vector>

#include "server/rpc/serve_main.h"
#include "server/rpc/local_components.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return anvil::ServeMain(args, anvil::LocalServeComponents(), "anvil-server");
}
