// Event timing of one kernel launch after the harness's input state, for the
// standalone read benchmarks in this folder (dram_read.cu, tma_read.cu): the
// operand is first written by a fill kernel, as the runner's fresh inputs are
// ("written": what is left of it in L2 stays there), or written and then
// evicted by a write of the flush buffer ("flushed"). The launch is timed
// between two events behind a spinning kernel (so it is queued before the
// first event), and the median of `reps` is returned.
#ifndef ANVIL_BENCH_EVENT_TIMER_H_
#define ANVIL_BENCH_EVENT_TIMER_H_

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "cuda_check.h"

__global__ void Spin(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

__global__ void Empty() {}

__global__ void Fill(uint4* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    p[i] = make_uint4(seed ^ unsigned(i), seed, unsigned(i >> 32), ~seed);
}

struct EventTimer {
  uint4* src = nullptr;    // the operand: n 16-byte elements are filled before each launch
  uint4* flush = nullptr;  // written after the fill when flushed
  size_t flush_n = 0;
  int reps;
  long long spin_cycles = 100000;  // ~50 µs
  cudaEvent_t ev0{}, ev1{};

  // The operand (`bytes`) and a 256 MiB flush buffer, with `reps` per figure.
  explicit EventTimer(size_t bytes, int reps_ = 15) : reps(reps_) {
    flush_n = (size_t(256) << 20) / 16;
    CHECK(cudaMalloc(&src, bytes));
    CHECK(cudaMalloc(&flush, flush_n * 16));
  }

  // µs between the events around one `launch()`, median of reps.
  template <typename Launch>
  double Median(size_t n, bool flushed, Launch&& launch) {
    if (ev0 == nullptr) {
      CHECK(cudaEventCreate(&ev0));
      CHECK(cudaEventCreate(&ev1));
    }
    std::vector<double> us;
    for (int r = 0; r < reps; ++r) {
      Fill<<<1056, 256>>>(src, n, 0x1234u + r);
      if (flushed) Fill<<<1056, 256>>>(flush, flush_n, 0x777u + r);
      CHECK(cudaDeviceSynchronize());
      Spin<<<1, 32>>>(spin_cycles);
      CHECK(cudaEventRecord(ev0));
      launch();
      CHECK(cudaEventRecord(ev1));
      CHECK(cudaEventSynchronize(ev1));
      CHECK(cudaGetLastError());
      float ms = 0;
      CHECK(cudaEventElapsedTime(&ms, ev0, ev1));
      us.push_back(ms * 1e3);
    }
    std::sort(us.begin(), us.end());
    return us[us.size() / 2];
  }
};

#endif  // ANVIL_BENCH_EVENT_TIMER_H_
