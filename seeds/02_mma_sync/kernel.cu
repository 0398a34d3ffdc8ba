// seeds/02_mma_sync/kernel.cu: tiled tensor-core HGEMM with mma.sync (sm_80+ path).
//
// Each CTA computes a BM x BN tile of C. Its warps form a WARPS_M x WARPS_N grid;
// each warp owns a (BM/WARPS_M) x (BN/WARPS_N) sub-tile made of m16n8k16 MMAs
// (fp16 inputs, fp32 accumulators). K is walked in BK slices through a
// STAGES-deep ring of shared-memory buffers filled by cp.async, so the loads of
// slice k+STAGES-1 overlap the MMAs of slice k. Fragments come out of shared
// memory with ldmatrix (ldmatrix.trans for the NN layout's K x N B tile).
// Shared-memory rows are padded by 8 halfs (16 bytes): with a row stride that is
// an odd multiple of 16 bytes, the 8 row addresses of one ldmatrix phase fall in
// 8 distinct 16-byte bank groups, so ldmatrix is conflict-free.
//
// Layout (exactly one, chosen by the builder):
//   ANVIL_LAYOUT_NT: A row-major MxK, B row-major NxK, C = A * B^T
//   ANVIL_LAYOUT_NN: A row-major MxK, B row-major KxN, C = A * B
// C is row-major MxN, fp16.
//
// Tails: every M, N, K >= 1 works, in-kernel.
//   * Aligned rows (K % 8 == 0, and N % 8 == 0 for NN's B): 16-byte cp.async,
//     and a chunk past the matrix edge uses src-size 0, i.e. the hardware fills
//     the 16 smem bytes with zeros. A chunk is either wholly inside or wholly
//     outside the matrix because both the chunk start and the row length are
//     multiples of 8 elements.
//   * Unaligned rows (any other K/N, or base pointers not 16-byte aligned): a
//     second instantiation loads element by element with bounds checks (plain
//     loads and st.shared, zero outside the matrix). Slower, but only such
//     shapes pay for it.
//   Zeros past K contribute nothing to the fp32 sums; rows/cols past M/N are
//   computed and never stored. The epilogue stores half2 where the pair is in
//   bounds and 4-byte aligned (N even), scalars otherwise.
//
// Split-K (ANVIL_SPLIT_K = S > 1): for skinny / small-MN, long-K shapes whose
// tile count cannot fill 132 SMs.
//   * splits = min(S, k_tiles) at run time (a split with no k-tile would only
//     add a zero slice). The grid is tiles x splits (blockIdx.y = split, so the
//     CTAs that run together share one K range of A/B in L2). Split s owns the
//     contiguous k-tiles [s*k_tiles/splits, (s+1)*k_tiles/splits): sizes differ
//     by at most one, the ranges tile [0, k_tiles) exactly, and an empty range
//     (only possible if splits > k_tiles) still stores a zero partial.
//   * Every split stores its whole BM x BN fp32 partial (bounds-checked, float2
//     where N is even) to workspace slice s: ws[s * slice + m * N + n], slice =
//     M*N rounded up to 4 floats. Every in-bounds element of slices
//     0..splits-1 is written on every call, so stale workspace contents never
//     matter.
//   * A second kernel on the same stream (stream order = the dependency) sums
//     slices 0..splits-1 in that fixed order in fp32 (deterministic, run to run
//     and split count to split count) and writes fp16 C once: float4 loads and
//     8-byte stores of 4 halfs where the workspace / C alignment allow (the
//     flat M*N array is contiguous, so only M*N % 4 leaves a scalar tail),
//     one element per thread otherwise.
//   * anvil_workspace_bytes = S * round_up(M*N, 4) * 4 + 16 (the 16 lets the
//     host align the workspace up to 16 bytes itself); 0 when S == 1.
//     anvil_gemm returns 4 if S > 1 and the workspace is null.
//   With S == 1 none of this exists: one launch, C written directly, no
//   workspace, and the same code (and registers) as before split-K.
//
// Knobs (defaults below; the rules are static_asserts and seed.json constraints):
//   ANVIL_BM, ANVIL_BN   CTA tile (rows of C, cols of C)
//   ANVIL_BK             K slice per pipeline stage (multiple of 16 = MMA K)
//   ANVIL_WARPS_M/_N     warp grid; the warp tile is (BM/WARPS_M) x (BN/WARPS_N),
//                        each a multiple of 16 (ldmatrix.x4 loads 16 rows / 2 n8 tiles)
//   ANVIL_STAGES         cp.async ring depth, 2..8
//   ANVIL_GROUP_M        tile raster: GROUP_M row-tiles are swept together so the
//                        CTAs running at once share A and B panels in L2
//   ANVIL_SPLIT_K        K splits, 1 (off), 2, 3, 4, 6, 8, 12, 16
//   ANVIL_PDL            1: kernels launched as programmatic dependents (below)
//   ANVIL_SHAPE_M/N/K    0: any shape; otherwise the problem's M, N, K fixed at
//                        compile time: the kernel reads them and the tile counts
//                        as constants (nvcc folds the k-loop's trip count, the
//                        raster's divisions and the tail checks), and anvil_gemm
//                        returns 5 for any other shape. The search's specialise
//                        stage sets all three.
//
// Host path (lean: it is inside every timed call): integer arithmetic for the
// grid, at most two cudaLaunchKernelExC calls whose return codes are the error
// check (no cudaGetLastError/PeekAtLastError, no device queries, no
// allocation, nothing that synchronises). The >48 KiB dynamic shared-memory
// opt-in is done once per process in a function-local static, and compiled
// out entirely when the kernel needs <= 48 KiB.

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cstddef>
#include <cstdint>

#if defined(ANVIL_LAYOUT_NT) && defined(ANVIL_LAYOUT_NN)
#error "define exactly one of ANVIL_LAYOUT_NT / ANVIL_LAYOUT_NN"
#endif
#if !defined(ANVIL_LAYOUT_NT) && !defined(ANVIL_LAYOUT_NN)
#error "define exactly one of ANVIL_LAYOUT_NT / ANVIL_LAYOUT_NN"
#endif

#ifndef ANVIL_BM
#define ANVIL_BM 128
#endif
#ifndef ANVIL_BN
#define ANVIL_BN 128
#endif
#ifndef ANVIL_BK
#define ANVIL_BK 32
#endif
#ifndef ANVIL_WARPS_M
#define ANVIL_WARPS_M 2
#endif
#ifndef ANVIL_WARPS_N
#define ANVIL_WARPS_N 2
#endif
#ifndef ANVIL_STAGES
#define ANVIL_STAGES 4
#endif
#ifndef ANVIL_GROUP_M
#define ANVIL_GROUP_M 8
#endif
#ifndef ANVIL_SPLIT_K
#define ANVIL_SPLIT_K 1
#endif
#ifndef ANVIL_PDL
#define ANVIL_PDL 1
#endif
#ifndef ANVIL_SHAPE_M
#define ANVIL_SHAPE_M 0
#endif
#ifndef ANVIL_SHAPE_N
#define ANVIL_SHAPE_N 0
#endif
#ifndef ANVIL_SHAPE_K
#define ANVIL_SHAPE_K 0
#endif

namespace {

#if defined(ANVIL_LAYOUT_NT)
constexpr bool kNT = true;
#else
constexpr bool kNT = false;
#endif

constexpr int kBM = ANVIL_BM;
constexpr int kBN = ANVIL_BN;
constexpr int kBK = ANVIL_BK;
constexpr int kWarpsM = ANVIL_WARPS_M;
constexpr int kWarpsN = ANVIL_WARPS_N;
constexpr int kStages = ANVIL_STAGES;
constexpr int kGroupM = ANVIL_GROUP_M;
constexpr int kSplitK = ANVIL_SPLIT_K;
constexpr bool kPdl = ANVIL_PDL == 1;
constexpr int kShapeM = ANVIL_SHAPE_M;  // 0: any
constexpr int kShapeN = ANVIL_SHAPE_N;
constexpr int kShapeK = ANVIL_SHAPE_K;
constexpr int kReduceThreads = 128;  // split-K reduction block

constexpr int kThreads = 32 * kWarpsM * kWarpsN;
constexpr int kWarpTileM = kBM / kWarpsM;  // rows of C per warp
constexpr int kWarpTileN = kBN / kWarpsN;  // cols of C per warp
constexpr int kMmaM = kWarpTileM / 16;     // m16 tiles per warp
constexpr int kMmaN = kWarpTileN / 8;      // n8 tiles per warp

// Shared-memory tiles, in halfs. A is BM x BK (K contiguous). B is BN x BK (NT,
// K contiguous) or BK x BN (NN, N contiguous). Each row carries kPad halfs.
constexpr int kPad = 8;
constexpr int kLdA = kBK + kPad;
constexpr int kLdB = kNT ? kBK + kPad : kBN + kPad;
constexpr int kStageA = kBM * kLdA;
constexpr int kStageB = kNT ? kBN * kLdB : kBK * kLdB;
constexpr int kSmemBytes = kStages * (kStageA + kStageB) * 2;

static_assert(kBK % 16 == 0 && kBK >= 16 && kBK <= 128,
              "BK: multiple of 16 (the MMA K) in 16..128");
static_assert(kWarpsM >= 1 && kWarpsN >= 1 && kWarpsM * kWarpsN <= 8,
              "warp grid: at most 8 warps (256 threads) per CTA: a 64x64 warp tile takes "
              "~230 registers per thread and 256 x 255 is the most the 64K register file holds");
static_assert(kBM % kWarpsM == 0 && kWarpTileM % 16 == 0,
              "BM/WARPS_M must be a multiple of 16 (ldmatrix.x4 A fragment rows)");
static_assert(kBN % kWarpsN == 0 && kWarpTileN % 16 == 0,
              "BN/WARPS_N must be a multiple of 16 (one ldmatrix.x4 feeds two n8 MMAs)");
static_assert(kWarpTileM * kWarpTileN <= 64 * 64,
              "warp tile above 64x64 needs >128 fp32 accumulators per thread: spills");
static_assert(kStages >= 2 && kStages <= 8, "STAGES: 2..8");
static_assert(kShapeM >= 0 && kShapeN >= 0 && kShapeK >= 0,
              "SHAPE_M/N/K: 0 (any shape) or the problem's dimension");
static_assert(kSmemBytes <= 232448, "shared memory above the 227 KiB per-block limit");
static_assert(kGroupM >= 1 && kGroupM <= 64, "GROUP_M: 1..64");
// Register budget (seed.json rule): accumulators + A/B fragments + ~4 per
// 16-byte cp.async chunk per thread per stage. The copy loop is fully unrolled
// and its addresses are invariant across the K loop, so ptxas keeps them live
// next to the accumulators; above ~240 it spills (1-warp 64x64x64: 212 B,
// 16x256x32: 368 B, 32x128x128 on 2 warps: 196 B, NN 16x240x16: 24 B).
static_assert(kWarpTileM * kWarpTileN / 32 + kMmaM * 4 + kMmaN * 2 +
                      (kBM + kBN) * kBK / (64 * kWarpsM * kWarpsN) <=
                  240,
              "register budget: accumulators + fragments + cp.async addresses spill");
static_assert(kSplitK >= 1 && kSplitK <= 16,
              "SPLIT_K: 1..16 (gridDim.y; every split adds an M*N fp32 workspace slice "
              "that the reduction reads once)");
// Conflict-free ldmatrix: row stride must be an odd multiple of 16 bytes.
static_assert(((kLdA * 2 / 16) & 1) == 1 && ((kLdB * 2 / 16) & 1) == 1,
              "padded row stride must be an odd multiple of 16 bytes");

// ---- PTX wrappers -----------------------------------------------------------

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte global->shared copy; src_bytes = 0 makes the hardware write 16 zeros
// without reading src (src must still be a valid address: we pass the base).
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src,
                                           int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst),
               "l"(src), "r"(src_bytes)
               : "memory");
}
// Programmatic dependent launch (PDL=1): each kernel is launched with
// programmatic stream serialisation, so it may be scheduled while the previous
// kernel on the stream drains; pdl_wait() (before any global load or store)
// blocks until that kernel has completed and its memory is visible, so results
// are those of stream order. pdl_release() lets the next kernel in once every
// CTA has called it; only the call's last kernel releases early, so no kernel
// of one call waits inside the device time of another of the same call.
__device__ __forceinline__ void pdl_wait() {
  if constexpr (kPdl) asm volatile("griddepcontrol.wait;\n" ::: "memory");
}
__device__ __forceinline__ void pdl_release() {
  if constexpr (kPdl) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
}

__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile(
      "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
      : "r"(addr)
      : "memory");
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile(
      "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
      : "r"(addr)
      : "memory");
}

// D = A(16x16, row) * B(16x8, col) + D, fp16 in, fp32 accumulate.
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4],
                                          uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// ---- global -> shared tile loads -------------------------------------------

// Copies a ROWS x COLS box of a row-major matrix (rows x cols, leading dimension
// `ld` == cols) starting at (r0, c0) into smem with row stride LDS, zero outside
// the matrix. kVec: 16-byte cp.async (requires cols % 8 == 0 and a 16-byte
// aligned base); otherwise element-wise guarded loads.
template <int ROWS, int COLS, int LDS, bool kVec>
__device__ __forceinline__ void load_tile(__half* s, const __half* g, int rows,
                                          int cols, int r0, int c0, int tid) {
  if constexpr (kVec) {
    constexpr int kChunksPerRow = COLS / 8;
    constexpr int kChunks = ROWS * kChunksPerRow;
#pragma unroll
    for (int i = 0; i < (kChunks + kThreads - 1) / kThreads; ++i) {
      const int c = tid + i * kThreads;
      if (kChunks % kThreads == 0 || c < kChunks) {
        const int r = c / kChunksPerRow;
        const int col = (c % kChunksPerRow) * 8;
        const int gr = r0 + r;
        const int gc = c0 + col;
        const bool ok = gr < rows && gc < cols;
        const __half* src = ok ? g + static_cast<size_t>(gr) * cols + gc : g;
        cp_async16(smem_u32(s + r * LDS + col), src, ok ? 16 : 0);
      }
    }
  } else {
    constexpr int kElems = ROWS * COLS;
#pragma unroll 4
    for (int e = tid; e < kElems; e += kThreads) {
      const int r = e / COLS;
      const int col = e % COLS;
      const int gr = r0 + r;
      const int gc = c0 + col;
      __half v = __float2half_rn(0.0f);
      if (gr < rows && gc < cols) v = g[static_cast<size_t>(gr) * cols + gc];
      s[r * LDS + col] = v;
    }
  }
}

template <bool kVec>
__device__ __forceinline__ void load_stage(__half* sA, __half* sB,
                                           const __half* A, const __half* B,
                                           int M, int N, int K, int m0, int n0,
                                           int k0, int tid) {
  load_tile<kBM, kBK, kLdA, kVec>(sA, A, M, K, m0, k0, tid);
  if constexpr (kNT) {
    load_tile<kBN, kBK, kLdB, kVec>(sB, B, N, K, n0, k0, tid);  // B: N x K
  } else {
    load_tile<kBK, kBN, kLdB, kVec>(sB, B, K, N, k0, n0, tid);  // B: K x N
  }
}

// ---- MMAs on one resident stage ---------------------------------------------

__device__ __forceinline__ void compute_stage(const __half* sA, const __half* sB,
                                              int warp_m, int warp_n, int lane,
                                              float (&acc)[kMmaM][kMmaN][4]) {
#pragma unroll
  for (int kk = 0; kk < kBK / 16; ++kk) {
    // A fragments: ldmatrix.x4 matrices = (rows 0-7, k 0-7), (rows 8-15, k 0-7),
    // (rows 0-7, k 8-15), (rows 8-15, k 8-15) = registers a0a1, a2a3, a4a5, a6a7.
    // Lane l gives row l%16, k offset (l/16)*8.
    uint32_t af[kMmaM][4];
#pragma unroll
    for (int i = 0; i < kMmaM; ++i) {
      const int row = warp_m * kWarpTileM + i * 16 + (lane % 16);
      const int col = kk * 16 + (lane / 16) * 8;
      ldmatrix_x4(af[i], smem_u32(sA + row * kLdA + col));
    }
    // B fragments for two n8 tiles per ldmatrix.x4: matrices = (n 0-7, k 0-7),
    // (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15) = b0,b1 of n-tile 0 and
    // b0,b1 of n-tile 1. The MMA wants thread t to hold B[k=2(t%4)+i][n=t/4].
    uint32_t bf[kMmaN][2];
#pragma unroll
    for (int j2 = 0; j2 < kMmaN / 2; ++j2) {
      uint32_t r[4];
      if constexpr (kNT) {
        // smem holds B as [n][k]: the 8x8 matrices are n-rows of k, and plain
        // ldmatrix gives thread t row t/4 (= n), cols 2(t%4)+i (= k). Lane l
        // gives n = l%8 + (l/16)*8, k offset ((l/8)%2)*8.
        const int n = warp_n * kWarpTileN + j2 * 16 + (lane % 8) + (lane / 16) * 8;
        const int k = kk * 16 + ((lane / 8) % 2) * 8;
        ldmatrix_x4(r, smem_u32(sB + n * kLdB + k));
      } else {
        // smem holds B as [k][n]: the 8x8 matrices are k-rows of n, and
        // ldmatrix.trans gives thread t element (row 2(t%4)+i, col t/4), i.e.
        // k = 2(t%4)+i, n = t/4. Lane l gives k = l%8 + ((l/8)%2)*8,
        // n offset (l/16)*8.
        const int k = kk * 16 + (lane % 8) + ((lane / 8) % 2) * 8;
        const int n = warp_n * kWarpTileN + j2 * 16 + (lane / 16) * 8;
        ldmatrix_x4_trans(r, smem_u32(sB + k * kLdB + n));
      }
      bf[2 * j2][0] = r[0];
      bf[2 * j2][1] = r[1];
      bf[2 * j2 + 1][0] = r[2];
      bf[2 * j2 + 1][1] = r[3];
    }
#pragma unroll
    for (int i = 0; i < kMmaM; ++i) {
#pragma unroll
      for (int j = 0; j < kMmaN; ++j) mma_16816(acc[i][j], af[i], bf[j][0], bf[j][1]);
    }
  }
}

// ---- epilogue ---------------------------------------------------------------

// One store instruction for a pair, whatever nvcc can prove about the bounds: with
// the shape compiled in (SHAPE_M/N/K) it merges the pair and tail branches into two
// scalar stores (as it did in 03_wgmma_tma, 14% slower on split-K partials there).
__device__ __forceinline__ void stg_half2(__half* p, float v0, float v1) {
  const __half2 h = __floats2half2_rn(v0, v1);
  asm volatile("st.global.b32 [%0], %1;\n" ::"l"(p), "r"(*reinterpret_cast<const uint32_t*>(&h))
               : "memory");
}
__device__ __forceinline__ void stg_f32x2(float* p, float v0, float v1) {
  asm volatile("st.global.v2.f32 [%0], {%1, %2};\n" ::"l"(p), "f"(v0), "f"(v1) : "memory");
}

// pairs_ok: N is even and C is 4-byte aligned, so (row, even col) pairs are
// 4-byte aligned and can be stored as one half2.
__device__ __forceinline__ void store_pair(__half* C, int M, int N, int row,
                                           int col, float v0, float v1, bool pairs_ok) {
  if (row >= M) return;
  __half* p = C + static_cast<size_t>(row) * N + col;
  if (pairs_ok && col + 1 < N) {
    stg_half2(p, v0, v1);
  } else {
    if (col < N) p[0] = __float2half_rn(v0);
    if (col + 1 < N) p[1] = __float2half_rn(v1);
  }
}

// Split-K partial: fp32 pair into the split's workspace slice P (M x N, ld N,
// 16-byte aligned). pairs_ok: N even, so the pair is 8-byte aligned.
__device__ __forceinline__ void store_partial(float* P, int M, int N, int row,
                                              int col, float v0, float v1, bool pairs_ok) {
  if (row >= M) return;
  float* p = P + static_cast<size_t>(row) * N + col;
  if (pairs_ok && col + 1 < N) {
    stg_f32x2(p, v0, v1);
  } else {
    if (col < N) p[0] = v0;
    if (col + 1 < N) p[1] = v1;
  }
}

// ---- the kernel ---------------------------------------------------------------

// ws / ws_slice / splits are used only when kSplitK > 1 (blockIdx.y = split).
template <bool kVec>
__global__ void __launch_bounds__(kThreads)
    mma_sync_gemm(const __half* __restrict__ A, const __half* __restrict__ B,
                  __half* __restrict__ C, int m_arg, int n_arg, int k_arg, int tiles_m_arg,
                  int tiles_n_arg, float* __restrict__ ws, size_t ws_slice, int splits) {
  // SHAPE_M/N/K: the problem as constants.
  const int M = kShapeM > 0 ? kShapeM : m_arg;
  const int N = kShapeN > 0 ? kShapeN : n_arg;
  const int K = kShapeK > 0 ? kShapeK : k_arg;
  const int tiles_m = kShapeM > 0 ? (kShapeM + kBM - 1) / kBM : tiles_m_arg;
  const int tiles_n = kShapeN > 0 ? (kShapeN + kBN - 1) / kBN : tiles_n_arg;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __half* sA = reinterpret_cast<__half*>(smem_raw);
  __half* sB = sA + kStages * kStageA;

  // Grouped raster: consecutive CTAs walk GROUP_M tile-rows column by column.
  const int pid = blockIdx.x;
  const int group_size = kGroupM * tiles_n;
  const int first_m = (pid / group_size) * kGroupM;
  const int group_m = min(tiles_m - first_m, kGroupM);
  const int tile_m = first_m + (pid % group_size) % group_m;
  const int tile_n = (pid % group_size) / group_m;
  const int m0 = tile_m * kBM;
  const int n0 = tile_n * kBN;

  const int tid = threadIdx.x;
  const int lane = tid % 32;
  const int warp = tid / 32;
  const int warp_m = warp / kWarpsN;
  const int warp_n = warp % kWarpsN;

  float acc[kMmaM][kMmaN][4];
#pragma unroll
  for (int i = 0; i < kMmaM; ++i)
#pragma unroll
    for (int j = 0; j < kMmaN; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

  const int k_tiles_all = (K + kBK - 1) / kBK;
  // This CTA's k-tiles: [kt0, kt0 + k_tiles). Split s of `splits` takes
  // [s*T/splits, (s+1)*T/splits): balanced, contiguous, exact cover of [0, T).
  // 64-bit products: s*T can pass INT_MAX for K near INT_MAX.
  int kt0 = 0;
  int k_tiles = k_tiles_all;
  if constexpr (kSplitK > 1) {
    const long long s = blockIdx.y;
    kt0 = static_cast<int>(s * k_tiles_all / splits);
    k_tiles = static_cast<int>((s + 1) * k_tiles_all / splits) - kt0;
  }
  const int k_base = kt0 * kBK;  // first K index of this CTA

  pdl_wait();
  if (gridDim.y == 1) pdl_release();  // split-K: the reduction comes next

  // Prologue: stages 0..STAGES-2 in flight, one commit group each (empty groups
  // past k_tiles keep the group count uniform).
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < k_tiles)
      load_stage<kVec>(sA + s * kStageA, sB + s * kStageB, A, B, M, N, K, m0, n0,
                       k_base + s * kBK, tid);
    cp_async_commit();
  }

  for (int kt = 0; kt < k_tiles; ++kt) {
    // Groups committed so far: (STAGES-1) + kt. Allowing STAGES-2 pending means
    // groups 0..kt are complete, i.e. this thread's copies for stage kt landed.
    cp_async_wait<kStages - 2>();
    // Everyone's copies (and plain stores, !kVec) for stage kt are visible, and
    // everyone has finished reading stage kt-1 (in the previous iteration), whose
    // buffer the load below refills.
    __syncthreads();
    const int next = kt + kStages - 1;
    if (next < k_tiles) {
      const int slot = next % kStages;  // == (kt - 1) % kStages
      load_stage<kVec>(sA + slot * kStageA, sB + slot * kStageB, A, B, M, N, K,
                       m0, n0, k_base + next * kBK, tid);
    }
    cp_async_commit();
    const int cur = kt % kStages;
    compute_stage(sA + cur * kStageA, sB + cur * kStageB, warp_m, warp_n, lane,
                  acc);
  }
  cp_async_wait<0>();  // nothing real is pending; leave no copy in flight at exit

  // C fragment of m16n8: c0,c1 at (row lane/4, cols 2*(lane%4)+{0,1}); c2,c3 at row+8.
  if constexpr (kSplitK == 1) {
    const bool pairs_ok = (N % 2 == 0) && (reinterpret_cast<uintptr_t>(C) % 4 == 0);
#pragma unroll
    for (int i = 0; i < kMmaM; ++i) {
#pragma unroll
      for (int j = 0; j < kMmaN; ++j) {
        const int row = m0 + warp_m * kWarpTileM + i * 16 + lane / 4;
        const int col = n0 + warp_n * kWarpTileN + j * 8 + (lane % 4) * 2;
        store_pair(C, M, N, row, col, acc[i][j][0], acc[i][j][1], pairs_ok);
        store_pair(C, M, N, row + 8, col, acc[i][j][2], acc[i][j][3], pairs_ok);
      }
    }
  } else {
    // Whole tile, even for an empty K range (zeros): the reduction reads every
    // in-bounds element of slices 0..splits-1.
    float* P = ws + blockIdx.y * ws_slice;
    const bool pairs_ok = (N % 2 == 0);  // ws and ws_slice are 16-byte multiples
#pragma unroll
    for (int i = 0; i < kMmaM; ++i) {
#pragma unroll
      for (int j = 0; j < kMmaN; ++j) {
        const int row = m0 + warp_m * kWarpTileM + i * 16 + lane / 4;
        const int col = n0 + warp_n * kWarpTileN + j * 8 + (lane % 4) * 2;
        store_partial(P, M, N, row, col, acc[i][j][0], acc[i][j][1], pairs_ok);
        store_partial(P, M, N, row + 8, col, acc[i][j][2], acc[i][j][3], pairs_ok);
      }
    }
  }
}

// Split-K reduction: C[e] = fp16(ws[0][e] + ws[1][e] + ... + ws[splits-1][e]),
// summed in fp32 in that order, over the flat M*N array (C and every slice are
// contiguous with ld N). kVec4: each thread takes 4 consecutive elements with
// float4 loads and one 8-byte store (ws 16-byte aligned, slice a multiple of 4
// floats, C 8-byte aligned); the last group may be partial (M*N % 4) and is
// done element-wise, so no unwritten workspace is ever read. Otherwise one
// element per thread.
template <bool kVec4>
__global__ void __launch_bounds__(kReduceThreads)
    splitk_reduce(const float* __restrict__ ws, __half* __restrict__ C, size_t mn,
                  size_t ws_slice, int splits) {
  pdl_wait();
  pdl_release();  // the call's last kernel
  const size_t t = static_cast<size_t>(blockIdx.x) * kReduceThreads + threadIdx.x;
  if constexpr (kVec4) {
    const size_t e = t * 4;
    if (e >= mn) return;
    if (e + 4 <= mn) {
      float4 sum = *reinterpret_cast<const float4*>(ws + e);
#pragma unroll
      for (int s = 1; s < kSplitK; ++s) {
        if (s < splits) {
          const float4 v = *reinterpret_cast<const float4*>(ws + s * ws_slice + e);
          sum.x += v.x;
          sum.y += v.y;
          sum.z += v.z;
          sum.w += v.w;
        }
      }
      const __half2 lo = __floats2half2_rn(sum.x, sum.y);
      const __half2 hi = __floats2half2_rn(sum.z, sum.w);
      uint2 packed;
      packed.x = *reinterpret_cast<const uint32_t*>(&lo);
      packed.y = *reinterpret_cast<const uint32_t*>(&hi);
      *reinterpret_cast<uint2*>(C + e) = packed;
    } else {
      for (size_t x = e; x < mn; ++x) {
        float sum = ws[x];
        for (int s = 1; s < splits; ++s) sum += ws[s * ws_slice + x];
        C[x] = __float2half_rn(sum);
      }
    }
  } else {
    if (t >= mn) return;
    float sum = ws[t];
#pragma unroll
    for (int s = 1; s < kSplitK; ++s) {
      if (s < splits) sum += ws[s * ws_slice + t];
    }
    C[t] = __float2half_rn(sum);
  }
}

// Opt in to >48 KiB of dynamic shared memory once per process (a function-local
// static: thread-safe, one guard load per call afterwards). Compiled out when
// the kernel fits the default 48 KiB.
cudaError_t configure_once() {
  if constexpr (kSmemBytes > 48 * 1024) {
    static const cudaError_t err = [] {
      cudaError_t e = cudaFuncSetAttribute(mma_sync_gemm<true>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           kSmemBytes);
      if (e == cudaSuccess)
        e = cudaFuncSetAttribute(mma_sync_gemm<false>,
                                 cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 kSmemBytes);
      return e;
    }();
    return err;
  } else {
    return cudaSuccess;
  }
}

// Floats per split slice: M*N rounded up to 4 so every slice starts 16-byte
// aligned (float4 reduction loads).
inline size_t ws_slice_floats(int M, int N) {
  return (static_cast<size_t>(M) * static_cast<size_t>(N) + 3) & ~static_cast<size_t>(3);
}

// cudaLaunchKernel, as a programmatic dependent of the stream's previous
// kernel with PDL=1.
cudaError_t launch_kernel(const void* kernel, dim3 grid, dim3 block, void** args, size_t smem,
                          cudaStream_t stream) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = attr;
  config.numAttrs = kPdl ? 1 : 0;
  return cudaLaunchKernelExC(&config, kernel, args);
}

// The host path. A template only so that `if constexpr` discards the split-K
// code (and never instantiates the reduction kernels) when S == 1.
template <int S>
int launch(const __half* A, const __half* B, __half* C, int M, int N, int K,
           void* workspace, cudaStream_t stream) {
  if (M < 1 || N < 1 || K < 1) return 1;
  // SHAPE_M/N/K: built for one problem; any other is refused.
  if ((kShapeM > 0 && M != kShapeM) || (kShapeN > 0 && N != kShapeN) ||
      (kShapeK > 0 && K != kShapeK))
    return 5;
  if (configure_once() != cudaSuccess) return 2;

  const long long tiles_m = (M + kBM - 1) / kBM;
  const long long tiles_n = (N + kBN - 1) / kBN;
  const long long tiles = tiles_m * tiles_n;
  if (tiles > INT_MAX || tiles_n * kGroupM > INT_MAX) return 3;

  // 16-byte cp.async needs every row start 16-byte aligned: row lengths that are
  // multiples of 8 halfs and 16-byte aligned base pointers.
  const bool rows_aligned = (K % 8 == 0) && (kNT || N % 8 == 0);
  const bool ptrs_aligned =
      ((reinterpret_cast<uintptr_t>(A) | reinterpret_cast<uintptr_t>(B)) & 15) == 0;
  const void* gemm = (rows_aligned && ptrs_aligned)
                         ? reinterpret_cast<const void*>(&mma_sync_gemm<true>)
                         : reinterpret_cast<const void*>(&mma_sync_gemm<false>);

  int tm = static_cast<int>(tiles_m);
  int tn = static_cast<int>(tiles_n);
  float* ws = nullptr;
  size_t ws_slice = 0;
  int splits = 1;
  if constexpr (S > 1) {
    if (workspace == nullptr) return 4;
    // Align up to 16 bytes (anvil_workspace_bytes includes the 16 spare bytes).
    ws = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(workspace) + 15) &
                                  ~static_cast<uintptr_t>(15));
    ws_slice = ws_slice_floats(M, N);
    const int k_tiles = (K + kBK - 1) / kBK;  // >= 1
    splits = k_tiles < S ? k_tiles : S;
  }

  void* gemm_args[] = {&A, &B, &C, &M, &N, &K, &tm, &tn, &ws, &ws_slice, &splits};
  const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(splits));
  // The launch's return code is the error check (same information as
  // cudaGetLastError after <<<>>>, without a second runtime call, and it does
  // not report someone else's earlier error as ours).
  if (launch_kernel(gemm, grid, dim3(kThreads), gemm_args, kSmemBytes, stream) != cudaSuccess)
    return 1;

  if constexpr (S > 1) {
    size_t mn = static_cast<size_t>(M) * static_cast<size_t>(N);
    const bool vec4 = (reinterpret_cast<uintptr_t>(C) & 7) == 0;  // ws is 16-aligned
    const size_t items = vec4 ? (mn + 3) / 4 : mn;
    const size_t blocks = (items + kReduceThreads - 1) / kReduceThreads;
    if (blocks > static_cast<size_t>(INT_MAX)) return 3;
    const void* reduce = vec4 ? reinterpret_cast<const void*>(&splitk_reduce<true>)
                              : reinterpret_cast<const void*>(&splitk_reduce<false>);
    const float* wsc = ws;
    void* red_args[] = {&wsc, &C, &mn, &ws_slice, &splits};
    if (launch_kernel(reduce, dim3(static_cast<unsigned>(blocks)), dim3(kReduceThreads),
                      red_args, 0, stream) != cudaSuccess)
      return 1;
  }
  return 0;
}

}  // namespace

extern "C" size_t anvil_workspace_bytes(int M, int N, int K) {
  (void)K;
  if constexpr (kSplitK == 1) {
    (void)M;
    (void)N;
    return 0;
  } else {
    if (M < 1 || N < 1) return 0;
    // +16: anvil_gemm aligns the pointer it is given up to 16 bytes.
    return static_cast<size_t>(kSplitK) * ws_slice_floats(M, N) * sizeof(float) + 16;
  }
}

extern "C" int anvil_gemm(const __half* A, const __half* B, __half* C, int M,
                          int N, int K, void* workspace, cudaStream_t stream) {
  return launch<kSplitK>(A, B, C, M, N, K, workspace, stream);
}
