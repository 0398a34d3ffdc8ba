// What a thread-block cluster costs a short kernel on the current GPU, apart
// from any GEMM: the same near-empty kernel (384 threads, one CTA per SM, the
// given dynamic shared memory, `ctas` CTAs) launched without a cluster and with
// clusters of 2 and 4, with and without the cluster barriers 03_wgmma_tma uses
// (one at the start after mbarrier init, release or relaxed; one split across
// the exit). Each variant runs as a CUDA graph of kNodes launches replayed
// kReplays times; the table gives µs per kernel (graph node overhead included,
// the same for every variant), so differences between rows are the cost.
//   build/bin/bench/anvil-cluster-cost [--ctas 112] [--smem 212992]
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#include <CLI/CLI.hpp>

#include "cuda_check.h"

namespace {

constexpr int kNodes = 50;
constexpr int kReplays = 40;

enum Sync : int { kNone = 0, kStartRelease = 1, kStartRelaxed = 2, kStartAndExit = 3 };

__global__ void __launch_bounds__(384, 1) Probe(int sync, int* out) {
  __shared__ unsigned long long bars[2];  // the dynamic shared memory only sizes the CTA
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(
                     static_cast<unsigned>(__cvta_generic_to_shared(bars)))
                 : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  if (sync == kStartRelaxed) {
    asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
    asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
  } else if (sync != kNone) {
    asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
    asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
  } else {
    __syncthreads();
  }
  if (sync == kStartAndExit) asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
  if (out != nullptr && threadIdx.x == 0) out[blockIdx.x] = static_cast<int>(bars[1]);
  if (sync == kStartAndExit) asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

// µs per kernel of `ctas` CTAs in clusters of `cluster` (0: no cluster attribute).
double Time(int ctas, int smem, int cluster, int sync) {
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaLaunchConfig_t config = {};
  cudaLaunchAttribute attr[1];
  config.gridDim = dim3(ctas);
  config.blockDim = dim3(384);
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  if (cluster > 0) {
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = cluster;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    config.attrs = attr;
    config.numAttrs = 1;
  }
  int* out = nullptr;
  cudaGraph_t graph;
  CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < kNodes; ++i) CHECK(cudaLaunchKernelEx(&config, Probe, sync, out));
  CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec;
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int i = 0; i < 3; ++i) CHECK(cudaGraphLaunch(exec, stream));  // warm-up
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  CHECK(cudaEventRecord(start, stream));
  for (int i = 0; i < kReplays; ++i) CHECK(cudaGraphLaunch(exec, stream));
  CHECK(cudaEventRecord(stop, stream));
  CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, start, stop));
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  CHECK(cudaStreamDestroy(stream));
  return ms * 1000.0 / (kNodes * kReplays);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"cluster_cost: what a thread-block cluster costs a near-empty kernel"};
  int ctas = 112, smem = 212992;
  app.add_option("--ctas", ctas, "CTAs per launch")->check(CLI::Range(1, 65536));
  app.add_option("--smem", smem, "dynamic shared memory bytes per CTA")->check(CLI::Range(0, 232448));
  CLI11_PARSE(app, argc, argv);
  CHECK(cudaFuncSetAttribute(Probe, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("# %s: %d CTAs of 384 threads, %d bytes of shared memory, graphs of %d x %d\n",
              prop.name, ctas, smem, kNodes, kReplays);
  std::printf("%-8s %-18s %8s\n", "cluster", "barriers", "us/kernel");
  const char* names[] = {"none", "start (release)", "start (relaxed)", "start + exit"};
  for (int round = 0; round < 2; ++round) {  // twice, interleaved: the spread
    std::printf("%-8s %-18s %8.3f\n", "off", "__syncthreads", Time(ctas, smem, 0, kNone));
    for (int cluster : {1, 2, 4}) {
      for (int sync = kNone; sync <= kStartAndExit; ++sync) {
        if (cluster == 1 && sync != kNone) continue;
        std::printf("%-8d %-18s %8.3f\n", cluster, names[sync], Time(ctas, smem, cluster, sync));
      }
    }
  }
  return 0;
}
