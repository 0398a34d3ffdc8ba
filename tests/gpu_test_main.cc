// main() for tests labelled "gpu": runs GoogleTest when a CUDA device is
// present, otherwise prints why and exits 77, which ctest reports as skipped.
#include <cstdio>

#include <cuda_runtime.h>
#include <gtest/gtest.h>

int main(int argc, char** argv) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    std::printf("SKIPPED: no CUDA device (%s); run the gpu-labelled tests on a GPU node\n",
                err == cudaSuccess ? "0 devices" : cudaGetErrorString(err));
    return 77;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
