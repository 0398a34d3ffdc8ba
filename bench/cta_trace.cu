// Where a tile-per-CTA 03_wgmma_tma kernel's time goes: the seed's kernel is
// built with ANVIL_TRACE, so each CTA records the SM clock at its milestones
// (and the global timer at entry and at the end of its epilogue) into
// anvil_trace; this program runs the call on freshly written inputs, as the
// runner's device samples do, and prints where the CTAs spend it.
//
// Slots of anvil_trace[cta] (clock64 unless noted):
//   0 entry (global ns)    1 entry                 2 ring initialised, cluster synced
//   3 consumer 0: last wgmma complete      4 consumer 0: epilogue done
//   5 consumer 0: epilogue done (global ns)
//   6 mbarriers initialised (thread 0)     7 cluster barrier / __syncthreads passed
//   8 + i   producer: slot free for k-tile i (before its TMA issue)
//   72 + i  consumer 0: k-tile i's bytes landed (full barrier passed)
//   136 + i consumer 0: k-tile i's wgmmas issued, k-tile i-1's complete
//   200 consumer 0: the staged epilogue's first barrier passed (EPILOGUE 1, 2)
//   201 consumer 0: setmaxnreg.inc done    202 producer: setmaxnreg.dec done
//   205, 206 thread 0: after the mbarrier.inits, after fence.mbarrier_init
//
// CMake builds one binary per line of bench/configs/cta_trace.txt (the seed's
// knobs as -D, as the builder passes them, and ANVIL_TRACE=1024; bench/CMakeLists.txt):
//   build/bin/bench/anvil-cta-trace-NAME --shape MxNxK [--reps 20]
// Only the non-persistent path without split-K is traced.
#include "../seeds/03_wgmma_tma/kernel.cu"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cuda_check.h"
#include "probe_args.h"

namespace {

// Random fp16 in [-1, 1): the runner's inputs are normal fp16 values, not bit noise.
__global__ void FillHalf(__half* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    unsigned h = static_cast<unsigned>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    p[i] = __float2half(static_cast<float>(h & 0xffff) / 32768.0f - 1.0f);
  }
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double Max(const std::vector<double>& v) {
  return v.empty() ? 0 : *std::max_element(v.begin(), v.end());
}

using Trace = unsigned long long[256];

// Per-CTA figures over all reps, in ns (ghz: the SM clock in cycles per ns).
struct Figures {
  std::vector<double> skew, setup, fill, loop, per_kt, wait_data, epi, total, span, ghz;
  std::vector<double> init, sync, to_issue, issue_to_land, cons_regs, epi_bar;
  std::vector<double> inits, init_fence, proxy_fence, prod_regs;
  std::vector<double> land, done, freed;  // per traced k-tile: sums over CTAs and reps
  double cta_count = 0;
};

// One CTA's record x of a call whose first CTA entered at g0 (global ns).
void AddCta(Figures& fg, const Trace& x, unsigned long long g0, int k_tiles, int traced) {
  const double f = double(x[4] - x[1]) / double(x[5] - x[0]);  // cycles per ns
  fg.ghz.push_back(f);
  // Signed: the early stage's issue (slot 8) may precede slot 2.
  const auto ns = [&](unsigned long long a, unsigned long long b) {
    return double(static_cast<long long>(b - a)) / f;
  };
  fg.skew.push_back(double(x[0] - g0));
  fg.setup.push_back(ns(x[1], x[2]));
  fg.init.push_back(ns(x[1], x[6]));
  fg.inits.push_back(ns(x[1], x[205]));
  fg.init_fence.push_back(ns(x[205], x[206]));
  fg.proxy_fence.push_back(ns(x[206], x[6]));
  if (x[202] != 0) fg.prod_regs.push_back(ns(x[2], x[202]));
  fg.sync.push_back(ns(x[6], x[7]));
  fg.to_issue.push_back(ns(x[2], x[8]));
  fg.issue_to_land.push_back(ns(x[8], x[72]));
  if (x[201] != 0) fg.cons_regs.push_back(ns(x[2], x[201]));
  if (x[200] != 0) fg.epi_bar.push_back(ns(x[3], x[200]));
  fg.fill.push_back(ns(x[2], x[72]));
  fg.loop.push_back(ns(x[72], x[3]));
  if (k_tiles > 1) fg.per_kt.push_back(ns(x[72], x[3]) / (k_tiles - 1));
  double waited = 0;
  for (int i = 1; i < traced; ++i) waited += ns(x[136 + i - 1], x[72 + i]);
  fg.wait_data.push_back(waited);
  fg.epi.push_back(ns(x[3], x[4]));
  fg.total.push_back(double(x[5] - x[0]));
  for (int i = 0; i < traced; ++i) {
    fg.land[i] += ns(x[2], x[72 + i]);
    fg.done[i] += ns(x[2], x[136 + i]);
    fg.freed[i] += ns(x[2], x[8 + i]);
  }
  fg.cta_count += 1;
}

// One call's records: its span, then every CTA that recorded its entry and end.
void AddCall(Figures& fg, const Trace* t, int k_tiles, int traced) {
  unsigned long long g0 = ~0ull, g1 = 0;
  for (int c = 0; c < ANVIL_TRACE; ++c)
    if (t[c][0] != 0) {
      g0 = std::min(g0, t[c][0]);
      g1 = std::max(g1, t[c][5]);
    }
  fg.span.push_back(double(g1 - g0));
  for (int c = 0; c < ANVIL_TRACE; ++c) {
    if (t[c][0] == 0 || t[c][5] == 0) continue;
    AddCta(fg, t[c], g0, k_tiles, traced);
  }
}

void PrintFigures(const Figures& fg, int traced) {
  std::printf("  %-44s %9s %9s\n", "ns, over CTAs and reps", "median", "max");
  const auto row = [](const char* what, const std::vector<double>& v) {
    std::printf("  %-44s %9.0f %9.0f\n", what, Median(v), Max(v));
  };
  row("kernel span: first entry to last epilogue end", fg.span);
  row("CTA entry after the first CTA's", fg.skew);
  row("entry to ring initialised (cluster synced)", fg.setup);
  row("  entry to mbarriers initialised", fg.init);
  row("    entry to the mbarrier.inits done", fg.inits);
  row("    fence.mbarrier_init.release.cluster", fg.init_fence);
  row("    fence.proxy.async.shared::cta", fg.proxy_fence);
  row("  then the cluster barrier / __syncthreads", fg.sync);
  row("initialised to k-tile 0 issued (producer)", fg.to_issue);
  row("  initialised to producer setmaxnreg done", fg.prod_regs);
  row("k-tile 0 issued to landed", fg.issue_to_land);
  row("initialised to consumer setmaxnreg done", fg.cons_regs);
  row("initialised to k-tile 0's bytes landed", fg.fill);
  row("k-tile 0 landed to last wgmma complete", fg.loop);
  row("  the same per k-tile", fg.per_kt);
  row("  of which waiting for bytes (after issue)", fg.wait_data);
  row("epilogue (consumer 0)", fg.epi);
  row("  to its first barrier (staged epilogues)", fg.epi_bar);
  row("CTA entry to epilogue end", fg.total);
  std::printf("  k-tile i, mean ns after the ring was initialised: landed / issued (previous\n"
              "  complete) / slot free for the producer\n");
  for (int i = 0; i < traced; ++i)
    std::printf("  %3d %8.0f %8.0f %8.0f\n", i, fg.land[i] / fg.cta_count, fg.done[i] / fg.cta_count,
                fg.freed[i] / fg.cta_count);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"cta_trace: where a compiled-in 03_wgmma_tma configuration's CTAs spend a call"};
  ProbeShape shape;
  int reps = 20;
  std::string name = argv[0];
  AddShapeOption(app, &shape);
  app.add_option("--reps", reps, "traced calls")->check(CLI::Range(1, 10000));
  app.add_option("--name", name, "name printed in the table (default: this program's)");
  CLI11_PARSE(app, argc, argv);
  const int M = shape.m, N = shape.n, K = shape.k;
  const size_t a_n = size_t(M) * K, b_n = size_t(N) * K, c_n = size_t(M) * N;
  __half *A, *B, *C;
  void* ws = nullptr;
  CHECK(cudaMalloc(&A, a_n * 2));
  CHECK(cudaMalloc(&B, b_n * 2));
  CHECK(cudaMalloc(&C, c_n * 2));
  const size_t ws_bytes = anvil_workspace_bytes(M, N, K);
  if (ws_bytes > 0) CHECK(cudaMalloc(&ws, ws_bytes));
  const int k_tiles = (K + kBK - 1) / kBK;
  const int traced = std::min(k_tiles, 64);

  std::vector<unsigned long long> host(size_t(ANVIL_TRACE) * 256);
  Figures fg;
  fg.land.assign(traced, 0);
  fg.done.assign(traced, 0);
  fg.freed.assign(traced, 0);
  for (int r = 0; r < reps + 2; ++r) {
    FillHalf<<<1056, 256>>>(A, a_n, 0x1234u + r);
    FillHalf<<<1056, 256>>>(B, b_n, 0x4321u + r);
    std::fill(host.begin(), host.end(), 0ull);
    CHECK(cudaMemcpyToSymbol(anvil_trace, host.data(), host.size() * 8));
    CHECK(cudaDeviceSynchronize());
    if (anvil_gemm(A, B, C, M, N, K, ws, 0) != 0) {
      std::fprintf(stderr, "anvil_gemm refused %dx%dx%d\n", M, N, K);
      return 1;
    }
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemcpyFromSymbol(host.data(), anvil_trace, host.size() * 8));
    if (r < 2) continue;  // warm-up: module load, first-touch
    AddCall(fg, reinterpret_cast<const Trace*>(host.data()), k_tiles, traced);
  }
  if (fg.cta_count == 0) {
    std::fprintf(stderr, "no CTA recorded a trace (persistent or split-K build?)\n");
    return 1;
  }
  std::printf("%s %dx%dx%d: %d CTAs, %d k-tiles, SM clock %.2f GHz (median)\n", name.c_str(), M,
              N, K, int(fg.cta_count / reps), k_tiles, Median(fg.ghz));
  PrintFigures(fg, traced);
  return 0;
}
