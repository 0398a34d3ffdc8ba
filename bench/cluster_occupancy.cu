// How many thread-block clusters of a given size the current GPU can hold at once
// (cudaOccupancyMaxActiveClusters) for a CTA shaped like 03_wgmma_tma's: one CTA
// per SM (launch bounds 1), `threads` threads and `smem` bytes of dynamic shared
// memory. Explains waves that a cluster launch adds (SPLIT_REDUCE=1, CLUSTER=2).
//   build/bin/bench/anvil-cluster-occupancy --threads 384 --smem 212992 [--threads T --smem S ...]
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include <CLI/CLI.hpp>

#include "cuda_check.h"

__global__ void __launch_bounds__(384, 1) Probe(int* out) {
  extern __shared__ int smem[];
  if (out != nullptr) out[blockIdx.x] = smem[threadIdx.x];
}

int main(int argc, char** argv) {
  CLI::App app{"cluster_occupancy: clusters of each size the GPU holds at once for a CTA shape"};
  std::vector<int> threads_list, smem_list;
  app.add_option("--threads", threads_list, "threads per CTA, one per CTA shape")->required();
  app.add_option("--smem", smem_list, "dynamic shared memory bytes, one per --threads")->required();
  CLI11_PARSE(app, argc, argv);
  if (threads_list.size() != smem_list.size()) {
    std::fprintf(stderr, "give one --smem per --threads\n");
    return 2;
  }
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("# %s, %d SMs\n", prop.name, sms);
  std::printf("threads,smem_bytes,cluster,max_active_clusters,ctas\n");
  if (cudaFuncSetAttribute(Probe, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) !=
      cudaSuccess)
    return 1;
  for (size_t a = 0; a < threads_list.size(); ++a) {
    const int threads = threads_list[a];
    const int smem = smem_list[a];
    if (cudaFuncSetAttribute(Probe, cudaFuncAttributeMaxDynamicSharedMemorySize, smem) !=
        cudaSuccess) {
      std::printf("%d,%d,-,shared memory refused,-\n", threads, smem);
      continue;
    }
    for (int c : {1, 2, 3, 4, 6, 8, 12, 16}) {
      cudaLaunchAttribute attr;
      attr.id = cudaLaunchAttributeClusterDimension;
      attr.val.clusterDim = {1, static_cast<unsigned>(c), 1};
      cudaLaunchConfig_t config = {};
      config.gridDim = dim3(1, c);
      config.blockDim = dim3(threads);
      config.dynamicSmemBytes = smem;
      config.attrs = &attr;
      config.numAttrs = 1;
      int clusters = 0;
      const cudaError_t err = cudaOccupancyMaxActiveClusters(&clusters, Probe, &config);
      if (err != cudaSuccess) {
        std::printf("%d,%d,%d,%s,-\n", threads, smem, c, cudaGetErrorString(err));
        cudaGetLastError();
        continue;
      }
      std::printf("%d,%d,%d,%d,%d\n", threads, smem, c, clusters, clusters * c);
    }
  }
  return 0;
}
