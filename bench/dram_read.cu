// How fast one kernel can read N bytes on the current GPU: the ceiling for the
// GEMMs whose time is one operand streamed from memory (16x4096x4096 reads its
// 33.5 MB B, 128x4096x14336 and 128x14336x4096 their 117 MB B, 4096x64x12288
// its 101 MB A, 8192x128x16384 its 268 MB A).
//
// Each row of the table is one read kernel (256 threads a CTA, 16-byte loads,
// four in flight a thread), timed alone between two events behind a spinning
// kernel (so the launch is queued before the first event), median of kReps.
// The buffer is first written by a fill kernel, as the harness's fresh inputs
// are ("written": what is left of it in L2 stays there), or written and then
// evicted by a 256 MiB write ("flushed"). `ctas` CTAs read either interleaved
// (grid-stride, "stride") or one contiguous chunk each ("chunk", as a GEMM CTA
// streams its own panel). The "empty" row is an empty kernel timed the same way:
// subtract it for the kernel's own time.
//   build/bin/bench/anvil-dram-read
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

#include <CLI/CLI.hpp>

#include "event_timer.h"

namespace {

constexpr int kThreads = 256;
constexpr int kReps = 15;

__device__ __forceinline__ uint4 Load(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// n 16-byte elements, n a multiple of 4 * kThreads * gridDim.x (the sizes below are).
__global__ void __launch_bounds__(kThreads) ReadStride(const uint4* p, size_t n, unsigned* out) {
  const size_t step = size_t(gridDim.x) * kThreads;
  unsigned acc = 0;
  for (size_t i = blockIdx.x * size_t(kThreads) + threadIdx.x; i < n; i += 4 * step) {
    const uint4 a = Load(p + i), b = Load(p + i + step), c = Load(p + i + 2 * step),
                d = Load(p + i + 3 * step);
    acc ^= a.x ^ b.y ^ c.z ^ d.w;
  }
  if (acc == 0x9e3779b9u) out[blockIdx.x] = acc;
}

__global__ void __launch_bounds__(kThreads) ReadChunk(const uint4* p, size_t n, unsigned* out) {
  const size_t chunk = n / gridDim.x;
  const uint4* q = p + blockIdx.x * chunk;
  unsigned acc = 0;
  for (size_t i = threadIdx.x; i < chunk; i += 4 * kThreads) {
    const uint4 a = Load(q + i), b = Load(q + i + kThreads), c = Load(q + i + 2 * kThreads),
                d = Load(q + i + 3 * kThreads);
    acc ^= a.x ^ b.y ^ c.z ^ d.w;
  }
  if (acc == 0x9e3779b9u) out[blockIdx.x] = acc;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"dram_read: how fast one kernel reads N bytes"};
  CLI11_PARSE(app, argc, argv);
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  EventTimer b(size_t(8192) * 16384 * 2, kReps);
  unsigned* out = nullptr;
  CHECK(cudaMalloc(&out, 65536 * sizeof(unsigned)));
  std::printf("# %s, %d SMs, L2 %d MB; µs between events (median of %d), GB/s = bytes / µs\n",
              prop.name, sms, prop.l2CacheSize >> 20, kReps);
  const double empty = b.Median(1 << 20, false, [&] { Empty<<<sms, kThreads>>>(); });
  std::printf("%-9s %-8s %-7s %6s %10s %8s\n", "MB", "state", "pattern", "ctas", "us", "GB/s");
  std::printf("%-9s %-8s %-7s %6d %10.2f %8s\n", "0", "-", "empty", sms, empty, "-");
  const size_t sizes[] = {size_t(4096) * 4096 * 2, size_t(4096) * 12288 * 2,
                          size_t(4096) * 14336 * 2, size_t(8192) * 16384 * 2};
  const int ctas[] = {64, sms, 2 * sms, 4 * sms, 8 * sms};
  for (size_t bytes : sizes) {
    const size_t n = bytes / 16;
    for (int flushed = 0; flushed < 2; ++flushed)
      for (int pattern = 0; pattern < 2; ++pattern)
        for (int g : ctas) {
          // Both kernels need n divisible by their step; trim to a multiple.
          const size_t unit = size_t(4) * kThreads * g;
          const size_t m = n / unit * unit;
          const double us = b.Median(n, flushed, [&] {
            if (pattern == 0) ReadStride<<<g, kThreads>>>(b.src, m, out);
            else ReadChunk<<<g, kThreads>>>(b.src, m, out);
          });
          std::printf("%-9.1f %-8s %-7s %6d %10.2f %8.0f\n", bytes / 1e6,
                      flushed ? "flushed" : "written", pattern ? "chunk" : "stride", g, us,
                      m * 16 / (us * 1e3));
        }
  }
  return 0;
}
