// main() for tests labelled "gpu": runs GoogleTest when a CUDA device is
// present, otherwise prints why and exits 77, which ctest reports as skipped.
#include <cstdio>

#include <string>

#include <gtest/gtest.h>

#include "node/node_facts.h"

int main(int argc, char** argv) {
  std::string why;
  if (anvil::node::CountGpus(&why) == 0) {
    std::printf("SKIPPED: no CUDA device (%s); run the gpu-labelled tests on a GPU node\n",
                why.c_str());
    return 77;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
