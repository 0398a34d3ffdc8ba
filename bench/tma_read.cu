// How fast TMA streams a GEMM operand into shared memory, with nothing
// computed on it: the ceiling of the 03 kernel's load path for the shapes whose
// time is one operand streamed (16x4096x4096's B, 128x4096x14336's B,
// 4096x64x12288's A). dram_read.cu measures plain loads of the same bytes; this
// one uses the kernel's path: one producer thread issues 2D TMA boxes of
// `box` rows x 64 fp16 (128-byte swizzle) into a ring of `stages` slots, each
// slot `kps` k-tiles of a `band`-row panel (the kernel's slots hold one), and
// four consumer warps wait for each slot, touch it and release it, as the
// kernel's consumers do around their wgmmas.
//
// Each row of the table is one launch: the operand is `rows` x `K` fp16 (K
// contiguous). CTA c streams band (c / dup) % (rows / band) over its K share
// (split shares), so dup CTAs read the same panel as a GEMM's M-tiles do; with
// a_rows > 0 each k-tile also loads an a_rows x 64 box of a second, small
// operand (the GEMM's other side, L2-resident). Timed as dram_read.cu: between
// two events behind a spinning kernel, median of kReps, after a fill
// ("written") or a fill and a 256 MiB write ("flushed"); subtract the "empty"
// row for the kernel's own time.
//   build/bin/bench/anvil-tma-read
#include <cuda.h>  // CUtensorMap and the cuTensorMapEncodeTiled types; no -lcuda
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include <CLI/CLI.hpp>

#include "event_timer.h"

namespace {

constexpr int kReps = 15;
constexpr int kBk = 64;          // fp16 of K per box row: one 128-byte swizzle row
constexpr int kRowBytes = 128;
constexpr int kThreads = 160;    // warp 0: producer; warps 1-4: consumers

__device__ __forceinline__ uint32_t Smem(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void MbarInit(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void MbarExpect(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void MbarArrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void MbarWait(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}
__device__ __forceinline__ void TmaLoad(uint32_t dst, const CUtensorMap* map, uint32_t bar, int x,
                                        int y) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4}], [%2];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(x), "r"(y)
      : "memory");
}

struct Shape {
  int band, box, stages, split, dup, a_rows, kps, k_tiles;  // k_tiles: per CTA
};

__global__ void __launch_bounds__(kThreads, 1)
    Stream(const __grid_constant__ CUtensorMap big, const __grid_constant__ CUtensorMap small,
           Shape s, int bands, unsigned* out) {
  extern __shared__ __align__(1024) uint8_t raw[];
  uint8_t* ring = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(raw) + 1023) & ~uintptr_t(1023));
  const int slot_bytes = (s.band + s.a_rows) * kRowBytes * s.kps;
  uint64_t* bars = reinterpret_cast<uint64_t*>(ring + s.stages * slot_bytes);  // full, then empty
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (threadIdx.x == 0) {
    for (int i = 0; i < s.stages; ++i) {
      MbarInit(Smem(&bars[i]), 1);
      MbarInit(Smem(&bars[s.stages + i]), 4);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  const int band = (blockIdx.x / s.dup) % bands;
  const int share = blockIdx.x / (s.dup * bands);
  const int row0 = band * s.band, k0 = share * s.k_tiles * kBk;
  const int a_row0 = (blockIdx.x % s.dup) * s.a_rows;
  if (warp == 0) {
    if (lane == 0) {
      for (int t = 0; t < s.k_tiles / s.kps; ++t) {
        const int i = t % s.stages;
        if (t >= s.stages) MbarWait(Smem(&bars[s.stages + i]), ((t / s.stages) - 1) & 1);
        const uint32_t full = Smem(&bars[i]);
        MbarExpect(full, slot_bytes);
        for (int j = 0; j < s.kps; ++j) {
          const uint32_t dst = Smem(ring + i * slot_bytes) + j * (s.band + s.a_rows) * kRowBytes;
          const int k = k0 + (t * s.kps + j) * kBk;
          for (int r = 0; r < s.band; r += s.box) TmaLoad(dst + r * kRowBytes, &big, full, k, row0 + r);
          if (s.a_rows > 0) TmaLoad(dst + s.band * kRowBytes, &small, full, k, a_row0);
        }
      }
    }
    return;
  }
  unsigned acc = 0;
  for (int t = 0; t < s.k_tiles / s.kps; ++t) {
    const int i = t % s.stages;
    MbarWait(Smem(&bars[i]), (t / s.stages) & 1);
    acc ^= reinterpret_cast<const unsigned*>(ring + i * slot_bytes)[threadIdx.x];
    __syncwarp();
    if (lane == 0) MbarArrive(Smem(&bars[s.stages + i]));
  }
  if (acc == 0x9e3779b9u) out[blockIdx.x] = acc;
}

PFN_cuTensorMapEncodeTiled_v12000 Encoder() {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
  CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q));
  if (q != cudaDriverEntryPointSuccess) {
    std::fprintf(stderr, "cuTensorMapEncodeTiled not found\n");
    std::exit(1);
  }
  return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
}

// rows x k fp16, K contiguous; boxes of `box` rows x 64.
CUtensorMap Map(const void* base, int rows, int k, int box) {
  static const PFN_cuTensorMapEncodeTiled_v12000 encode = Encoder();
  CUtensorMap map;
  const cuuint64_t dims[2] = {cuuint64_t(k), cuuint64_t(rows)};
  const cuuint64_t strides[1] = {cuuint64_t(k) * 2};
  const cuuint32_t boxes[2] = {cuuint32_t(kBk), cuuint32_t(box)};
  const cuuint32_t elem[2] = {1, 1};
  if (encode(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, const_cast<void*>(base), dims, strides, boxes,
             elem, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
             CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS) {
    std::fprintf(stderr, "cuTensorMapEncodeTiled failed (%d x %d, box %d)\n", rows, k, box);
    std::exit(1);
  }
  return map;
}

struct Row {
  const char* what;
  int rows, k;
  Shape s;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tma_read: how fast TMA streams a GEMM operand into shared memory"};
  CLI11_PARSE(app, argc, argv);
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  EventTimer b(size_t(4096) * 14336 * 2, kReps);
  unsigned* out = nullptr;
  CHECK(cudaMalloc(&out, 65536 * sizeof(unsigned)));
  uint16_t* small = nullptr;
  CHECK(cudaMalloc(&small, size_t(128) * 14336 * 2));
  CHECK(cudaMemset(small, 0, size_t(128) * 14336 * 2));
  CHECK(cudaFuncSetAttribute(Stream, cudaFuncAttributeMaxDynamicSharedMemorySize, 232448));
  std::printf("# %s, %d SMs; TMA streams of a rows x K fp16 operand; µs between events (median of %d)\n",
              prop.name, prop.multiProcessorCount, kReps);
  const double empty = b.Median(1 << 20, false, [&] { Empty<<<prop.multiProcessorCount, 128>>>(); });
  std::printf("%-14s %5s %4s %6s %4s %5s %4s %6s %6s %8s %9s %9s %11s\n", "operand", "band", "box",
              "stages", "kps", "split", "dup", "a_rows", "ctas", "state", "us", "GB/s/SM",
              "us/k-tile");
  std::printf("%-14s %5s %4s %6s %4s %5s %4s %6s %6d %8s %9.2f %9s %11s\n", "empty", "-", "-", "-",
              "-", "-", "-", "-", prop.multiProcessorCount, "-", empty, "-", "-");
  // {band, box, stages, split, dup, a_rows, kps}: kps k-tiles of 64 a slot; k_tiles is filled in.
  const Row rows[] = {
      // 16x4096x4096 swapped: the winner's 64x16 (64 CTAs, 16 stages, A's 16 rows).
      {"B 4096x4096", 4096, 4096, {64, 64, 16, 1, 1, 16, 1, 0}},
      {"B 4096x4096", 4096, 4096, {64, 64, 16, 1, 1, 0, 1, 0}},
      {"B 4096x4096", 4096, 4096, {64, 32, 16, 1, 1, 16, 1, 0}},
      {"B 4096x4096", 4096, 4096, {64, 64, 8, 1, 1, 16, 1, 0}},
      {"B 4096x4096", 4096, 4096, {64, 64, 16, 2, 1, 16, 1, 0}},
      {"B 4096x4096", 4096, 4096, {32, 32, 16, 1, 1, 16, 1, 0}},
      {"B 4096x4096", 4096, 4096, {128, 128, 8, 1, 1, 16, 1, 0}},
      // The same with two and four k-tiles a slot (the ring's bytes kept).
      {"B 4096x4096", 4096, 4096, {64, 64, 8, 1, 1, 16, 2, 0}},
      {"B 4096x4096", 4096, 4096, {64, 64, 4, 1, 1, 16, 4, 0}},
      {"B 4096x4096", 4096, 4096, {64, 64, 8, 2, 1, 16, 2, 0}},
      // 128x4096x14336: the winner's 64x64 (two M-tiles read each B panel).
      {"B 4096x14336", 4096, 14336, {64, 64, 13, 1, 2, 64, 1, 0}},
      {"B 4096x14336", 4096, 14336, {64, 64, 13, 1, 1, 0, 1, 0}},
      {"B 4096x14336", 4096, 14336, {64, 64, 13, 2, 1, 0, 1, 0}},
      {"B 4096x14336", 4096, 14336, {128, 128, 6, 2, 1, 0, 1, 0}},
      {"B 4096x14336", 4096, 14336, {64, 64, 6, 1, 2, 64, 2, 0}},
      {"B 4096x14336", 4096, 14336, {64, 64, 6, 2, 1, 0, 2, 0}},
      // 4096x64x12288 (NN): A streamed, 64-row panels, B's 64 columns aside.
      {"A 4096x12288", 4096, 12288, {64, 64, 13, 1, 1, 0, 1, 0}},
      {"A 4096x12288", 4096, 12288, {64, 64, 13, 2, 1, 0, 1, 0}},
      {"A 4096x12288", 4096, 12288, {64, 64, 6, 1, 1, 0, 2, 0}},
  };
  for (const Row& r : rows) {
    Shape s = r.s;
    const int bands = r.rows / s.band;
    s.k_tiles = r.k / kBk / s.split;
    const int ctas = bands * s.dup * s.split;
    const CUtensorMap big = Map(b.src, r.rows, r.k, s.box);
    const CUtensorMap sm = Map(small, 128, r.k, s.a_rows > 0 ? s.a_rows : 16);
    const size_t smem = 1024 + size_t(s.stages) * (s.band + s.a_rows) * kRowBytes * s.kps + 16 * s.stages;
    const size_t bytes = size_t(r.rows) * r.k * 2;
    const size_t moved = size_t(ctas) * s.k_tiles * (s.band + s.a_rows) * kRowBytes;
    for (int flushed = 0; flushed < 2; ++flushed) {
      const double us = b.Median(bytes / 16, flushed, [&] {
        Stream<<<ctas, kThreads, smem>>>(big, sm, s, bands, out);
      });
      std::printf("%-14s %5d %4d %6d %4d %5d %4d %6d %6d %8s %9.2f %9.1f %11.3f\n", r.what, s.band,
                  s.box, s.stages, s.kps, s.split, s.dup, s.a_rows, ctas,
                  flushed ? "flushed" : "written", us, moved / ((us - empty) * 1e3) / ctas,
                  (us - empty) / s.k_tiles);
    }
  }
  return 0;
}
