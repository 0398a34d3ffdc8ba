// anvil-worker: the fleet worker daemon (registers with a coordinator, leases
// candidates, builds and measures them). The Fleet service is not built yet;
// until then this says so and points to the local mode.
#include <cstdio>

int main() {
  std::fprintf(stderr,
               "anvil-worker: the fleet daemon is not built yet; `anvil eval` and `anvil optimize` "
               "run the same builder and runner on this node's GPU.\n");
  return 3;
}
