// How many thread-block clusters of a given size the current GPU can hold at once
// (cudaOccupancyMaxActiveClusters) for a CTA shaped like 03_wgmma_tma's: one CTA
// per SM (launch bounds 1), `threads` threads and `smem` bytes of dynamic shared
// memory. Explains waves that a cluster launch adds (SPLIT_REDUCE=1, CLUSTER=2).
//   nvcc -O2 -arch=sm_90a -o cluster_occupancy cluster_occupancy.cu
//   ./cluster_occupancy THREADS SMEM_BYTES [THREADS SMEM_BYTES ...]
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

__global__ void __launch_bounds__(384, 1) Probe(int* out) {
  extern __shared__ int smem[];
  if (out != nullptr) out[blockIdx.x] = smem[threadIdx.x];
}

int main(int argc, char** argv) {
  if (argc < 3 || argc % 2 == 0) {
    std::fprintf(stderr, "usage: %s THREADS SMEM_BYTES [THREADS SMEM_BYTES ...]\n", argv[0]);
    return 2;
  }
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  std::printf("# %s, %d SMs\n", prop.name, sms);
  std::printf("threads,smem_bytes,cluster,max_active_clusters,ctas\n");
  if (cudaFuncSetAttribute(Probe, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) !=
      cudaSuccess)
    return 1;
  for (int a = 1; a + 1 < argc; a += 2) {
    const int threads = std::atoi(argv[a]);
    const int smem = std::atoi(argv[a + 1]);
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
