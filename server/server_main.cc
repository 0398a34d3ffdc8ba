// anvil-server: the gRPC coordinator (KernelSearch and Fleet services). The
// services are not built yet; until then this says so and points to the
// local mode, which runs the same search in one process tree.
#include <cstdio>

int main() {
  std::fprintf(stderr,
               "anvil-server: the gRPC coordinator is not built yet; `anvil optimize` runs the "
               "search in local mode on this node.\n");
  return 3;
}
