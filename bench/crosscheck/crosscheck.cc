// anvil-crosscheck: times a built candidate and the cuBLAS family again, in
// the two graph regimes, by a method that shares no code with the runner, so
// a disagreement points at one of the two timers:
//   - every implementation of a shape is captured with the same number of
//     calls N (a replay of the slowest eager call lasting >= 2 ms), not N per
//     implementation;
//   - hot: all N calls on one operand set; cold: call j on set j mod S, each
//     set its own cudaMalloc (not slices of a pool), S sets over 3x the L2;
//   - time per call = events around R = 10 replays back to back (no L2 flush,
//     no input regeneration in between: the steady state of a streaming
//     loop) / (R N), median of 7, implementations interleaved by round;
//   - cuBLASLt autotuned here: the fastest of the heuristic's top 32
//     algorithms in that regime (each timed once, the best three again).
// Options that put back one condition of the runner at a time, to find which
// one moves a figure when the two timers disagree (Conditions below): CUPTI
// attached as the runner attaches it, one timed replay after one untimed, and
// N sized per implementation.
// One plan row (plan.h) per process: `anvil-crosscheck --plan PLAN.csv --row I`. Prints
// CSV: m,n,k,layout,regime,candidate_us,cublas_us,lt_heuristic_us,lt_auto_us,
// ratio,runner_ratio,agree_3pct. The candidate's output is compared with
// cuBLAS's on random inputs first (a wrong kernel is reported, not timed).
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cupti.h>
#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "bench/crosscheck/plan.h"

namespace {

#define CC_CHECK(x)                                                          \
  do {                                                                       \
    auto e_ = (x);                                                           \
    if (static_cast<int>(e_) != 0) {                                         \
      std::fprintf(stderr, "%s:%d %s failed: %d\n", __FILE__, __LINE__, #x, \
                   static_cast<int>(e_));                                    \
      std::exit(1);                                                          \
    }                                                                        \
  } while (0)

using GemmFn = int (*)(const __half*, const __half*, __half*, int, int, int, void*, cudaStream_t);
using WsFn = size_t (*)(int, int, int);
using Call = std::function<void(const __half*, const __half*, __half*, cudaStream_t)>;

constexpr int kSamples = 7;

// Which of the runner's conditions to reproduce (all off: the method above).
struct Conditions {
  bool cupti = false;      // activity callbacks registered, a subscriber, kernel activity
                           // enabled around the eager calls and off while timing
  bool cupti_on = false;   // and kernel activity left on while timing
  bool audit = false;      // and API callbacks of both domains on around the eager calls
  bool finalize = false;   // and CUPTI detached (cuptiFinalize) before the graphs are made
  bool early = false;      // CUPTI attached before the process's first CUDA call, so before
                           // its context exists (as the runner attached it until 2026-11-27)
  bool cupti_toggle = false;  // and kernel activity switched on and off around one eager
                              // call before each round of samples, the graphs alive
  int replays = 10;        // replays between the two events
  int lead = 0;            // untimed replays launched just before the first event
  bool per_impl = false;   // N per implementation (its eager call, replay >= 1 ms)
  bool normal = false;     // inputs from N(0, 1) (the runner's), not uniform in [-1, 1)
  bool reference = false;  // a GEMM with fp32 output through the same cuBLAS handle on a
                           // second stream first (the runner's reference), and after
                           // every sample round
  bool regenerate = false;  // before each sample: the hot set's A and B rewritten, and in
                            // the cold regime L2 flushed (a memset over twice its size)
  bool trace = false;  // after the samples, one more replay per implementation watched by
                       // CUPTI: kernel duration and gap between kernels (stderr)
};
Conditions g_cond;

void CUPTIAPI CuptiBuffer(uint8_t** buffer, size_t* size, size_t* max_records) {
  *size = size_t(8) << 20;
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, *size));
  *max_records = 0;
}
// Kernel records (start, end in ns) delivered while tracing.
std::vector<std::pair<uint64_t, uint64_t>> g_kernels;
void CUPTIAPI CuptiDone(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* record = nullptr;
  while (g_cond.trace && cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      g_kernels.push_back({k->start, k->end});
    }
  }
  std::free(buffer);
}
void CUPTIAPI CuptiApi(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

void CuptiActivity(bool on) {
  for (CUpti_ActivityKind k : {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMSET,
                               CUPTI_ACTIVITY_KIND_MEMCPY}) {
    CC_CHECK(on ? cuptiActivityEnable(k) : cuptiActivityDisable(k));
  }
  if (!on) CC_CHECK(cuptiActivityFlushAll(1));
}

CUpti_SubscriberHandle g_sub = nullptr;

void AttachCupti() {
  CC_CHECK(cuptiActivityRegisterCallbacks(CuptiBuffer, CuptiDone));
  CC_CHECK(cuptiSubscribe(&g_sub, CuptiApi, nullptr));
}

void Callbacks(bool on) {
  for (CUpti_CallbackDomain d : {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_CB_DOMAIN_DRIVER_API}) {
    CC_CHECK(cuptiEnableDomain(on ? 1 : 0, g_sub, d));
  }
}

// Uniform values in [-1, 1) from a hash of the index (never zeros: they run
// faster than real data), written from the host.
void Fill(__half* p, size_t n, unsigned seed) {
  std::vector<__half> host(n);
  auto uniform = [](unsigned x) {
    x ^= x >> 13, x *= 0x5bd1e995u, x ^= x >> 15;
    return float(x & 0xffff) / 32768.0f - 1.0f;
  };
  for (size_t i = 0; i < n; ++i) {
    const unsigned x = unsigned(i) * 2654435761u ^ seed;
    if (g_cond.normal) {  // Box-Muller from two uniforms in (0, 1]
      const float u1 = (uniform(x) + 1.0f) * 0.5f + 1e-7f, u2 = (uniform(x * 7919u + 1) + 1.0f) * 0.5f;
      host[i] = __float2half(std::sqrt(-2.0f * std::log(u1)) * std::cos(6.2831853f * u2));
    } else {
      host[i] = __float2half(uniform(x));
    }
  }
  CC_CHECK(cudaMemcpy(p, host.data(), n * 2, cudaMemcpyHostToDevice));
}

struct Operands {
  __half *a, *b, *c;
};

Operands Allocate(const anvil::crosscheck::Row& r, unsigned seed) {
  Operands o;
  const size_t na = size_t(r.m) * r.k, nb = size_t(r.n) * r.k, nc = size_t(r.m) * r.n;
  CC_CHECK(cudaMalloc(&o.a, na * 2));
  CC_CHECK(cudaMalloc(&o.b, nb * 2));
  CC_CHECK(cudaMalloc(&o.c, nc * 2));
  Fill(o.a, na, seed);
  Fill(o.b, nb, seed * 7 + 1);
  return o;
}

// cuBLASLt for row-major C = A B^T (nt) or A B (nn): column-major C^T = B' A^T.
struct Lt {
  cublasLtHandle_t h;
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t la, lb, lc;
  void* ws;
  size_t ws_bytes = size_t(64) << 20;
  std::vector<cublasLtMatmulHeuristicResult_t> algos;

  explicit Lt(const anvil::crosscheck::Row& r) {
    CC_CHECK(cublasLtCreate(&h));
    CC_CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t op_b = r.nt ? CUBLAS_OP_T : CUBLAS_OP_N, op_n = CUBLAS_OP_N;
    CC_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_b, sizeof(op_b)));
    CC_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_n, sizeof(op_n)));
    CC_CHECK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16F, r.nt ? r.k : r.n, r.nt ? r.n : r.k,
                                        r.nt ? r.k : r.n));
    CC_CHECK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16F, r.k, r.m, r.k));
    CC_CHECK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16F, r.n, r.m, r.n));
    CC_CHECK(cudaMalloc(&ws, ws_bytes));
    cublasLtMatmulPreference_t pref;
    CC_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    CC_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                  &ws_bytes, sizeof(ws_bytes)));
    algos.resize(32);
    int found = 0;
    CC_CHECK(cublasLtMatmulAlgoGetHeuristic(h, desc, lb, la, lc, lc, pref, 32, algos.data(), &found));
    algos.resize(found);
  }
  Call With(int i) {
    const cublasLtMatmulAlgo_t* algo = &algos[i].algo;
    return [this, algo](const __half* a, const __half* b, __half* c, cudaStream_t s) {
      const float one = 1, zero = 0;
      CC_CHECK(cublasLtMatmul(h, desc, &one, b, lb, a, la, &zero, c, lc, c, lc, algo, ws, ws_bytes, s));
    };
  }
};

struct Timer {
  const anvil::crosscheck::Row& row;
  cudaStream_t stream;
  std::vector<Operands> sets;  // [0] is the hot set
  int calls = 4;

  std::function<void()> before_sample = [] {};
  // Per-call time of one sample: R replays of the graph between two events.
  double Sample(cudaGraphExec_t exec) {
    before_sample();
    cudaEvent_t e0, e1;
    CC_CHECK(cudaEventCreate(&e0));
    CC_CHECK(cudaEventCreate(&e1));
    for (int i = 0; i < g_cond.lead; ++i) CC_CHECK(cudaGraphLaunch(exec, stream));
    CC_CHECK(cudaEventRecord(e0, stream));
    for (int i = 0; i < g_cond.replays; ++i) CC_CHECK(cudaGraphLaunch(exec, stream));
    CC_CHECK(cudaEventRecord(e1, stream));
    CC_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    CC_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    cudaEventDestroy(e0), cudaEventDestroy(e1);
    return ms * 1e3 / (double(g_cond.replays) * calls);
  }
  // With per_impl, N for this implementation alone (a replay of about 1 ms);
  // else the shared N.
  cudaGraphExec_t Capture(const Call& call, bool cold) {
    const int shared = calls;
    if (g_cond.per_impl) {
      const int sets = int(this->sets.size()) - 1;
      calls = std::clamp(int(std::ceil(1000.0 / EagerUs(call))), 4, 4096);
      if (cold) calls = (std::max(calls, sets) + sets - 1) / sets * sets;
    }
    cudaGraphExec_t exec = CaptureN(call, cold);
    calls_of[exec] = calls;
    calls = shared;
    return exec;
  }
  std::map<cudaGraphExec_t, int> calls_of;
  double SampleOf(cudaGraphExec_t exec) {
    const int shared = calls;
    calls = calls_of[exec];
    const double us = Sample(exec);
    calls = shared;
    return us;
  }
  cudaGraphExec_t CaptureN(const Call& call, bool cold) {
    cudaGraph_t g;
    CC_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    for (int j = 0; j < calls; ++j) {
      const Operands& o = cold ? sets[1 + j % (sets.size() - 1)] : sets[0];
      call(o.a, o.b, o.c, stream);
    }
    CC_CHECK(cudaStreamEndCapture(stream, &g));
    size_t nodes = 0, other = 0;
    CC_CHECK(cudaGraphGetNodes(g, nullptr, &nodes));
    std::vector<cudaGraphNode_t> list(nodes);
    CC_CHECK(cudaGraphGetNodes(g, list.data(), &nodes));
    for (cudaGraphNode_t n : list) {
      cudaGraphNodeType type;
      CC_CHECK(cudaGraphNodeGetType(n, &type));
      other += type != cudaGraphNodeTypeKernel;
    }
    size_t edges = 0, programmatic = 0;
    CC_CHECK(cudaGraphGetEdges(g, nullptr, nullptr, nullptr, &edges));
    std::vector<cudaGraphNode_t> from(edges), to(edges);
    std::vector<cudaGraphEdgeData> data(edges);
    if (edges) CC_CHECK(cudaGraphGetEdges(g, from.data(), to.data(), data.data(), &edges));
    for (const cudaGraphEdgeData& d : data) programmatic += d.type == cudaGraphDependencyTypeProgrammatic;
    std::fprintf(stderr, "graph %s: %d calls, %zu nodes, %zu not kernels, %zu of %zu edges programmatic\n",
                 cold ? "cold" : "hot", calls, nodes, other, programmatic, edges);
    cudaGraphExec_t exec;
    CC_CHECK(cudaGraphInstantiate(&exec, g, 0));
    CC_CHECK(cudaGraphDestroy(g));
    CC_CHECK(cudaGraphLaunch(exec, stream));  // upload and warm up
    CC_CHECK(cudaStreamSynchronize(stream));
    return exec;
  }
  double EagerUs(const Call& call) {
    cudaEvent_t e0, e1;
    CC_CHECK(cudaEventCreate(&e0));
    CC_CHECK(cudaEventCreate(&e1));
    for (int i = 0; i < 3; ++i) call(sets[0].a, sets[0].b, sets[0].c, stream);
    CC_CHECK(cudaEventRecord(e0, stream));
    for (int i = 0; i < 10; ++i) call(sets[0].a, sets[0].b, sets[0].c, stream);
    CC_CHECK(cudaEventRecord(e1, stream));
    CC_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    CC_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    return ms * 100;
  }
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// One replay watched by CUPTI: kernels, median duration, median gap from one
// kernel's end to the next one's start (negative: overlap), wall time per
// kernel. On stderr: trace,regime,impl,kernels,kernel_us,gap_us,span_us.
void TraceReplay(Timer& t, cudaGraphExec_t exec, const char* regime, const char* impl) {
  g_kernels.clear();
  CuptiActivity(true);
  CC_CHECK(cudaGraphLaunch(exec, t.stream));
  CC_CHECK(cudaStreamSynchronize(t.stream));
  CuptiActivity(false);  // flushes: the records are in g_kernels now
  std::sort(g_kernels.begin(), g_kernels.end());
  std::vector<double> dur, gap;
  for (size_t i = 0; i < g_kernels.size(); ++i) {
    dur.push_back((g_kernels[i].second - g_kernels[i].first) * 1e-3);
    if (i) gap.push_back((double(g_kernels[i].first) - double(g_kernels[i - 1].second)) * 1e-3);
  }
  const double span = g_kernels.empty() ? 0
                      : (double(g_kernels.back().second) - double(g_kernels.front().first)) * 1e-3 /
                            double(g_kernels.size());
  std::fprintf(stderr, "trace,%s,%s,%zu,%.3f,%.3f,%.3f\n", regime, impl, g_kernels.size(),
               dur.empty() ? 0 : Median(dur), gap.empty() ? 0 : Median(gap), span);
}

// Largest |x - y| / max|y| between the candidate's and cuBLAS's outputs.
double CompareOutputs(const anvil::crosscheck::Row& r, const Call& cand, const Call& ref, Timer& t) {
  const size_t nc = size_t(r.m) * r.n;
  __half* c2;
  CC_CHECK(cudaMalloc(&c2, nc * 2));
  cand(t.sets[0].a, t.sets[0].b, t.sets[0].c, t.stream);
  ref(t.sets[0].a, t.sets[0].b, c2, t.stream);
  CC_CHECK(cudaStreamSynchronize(t.stream));
  std::vector<__half> x(nc), y(nc);
  CC_CHECK(cudaMemcpy(x.data(), t.sets[0].c, nc * 2, cudaMemcpyDeviceToHost));
  CC_CHECK(cudaMemcpy(y.data(), c2, nc * 2, cudaMemcpyDeviceToHost));
  cudaFree(c2);
  double worst = 0, scale = 1e-6;
  for (size_t i = 0; i < nc; ++i) scale = std::max(scale, std::fabs(double(__half2float(y[i]))));
  for (size_t i = 0; i < nc; ++i) {
    const double d = std::fabs(double(__half2float(x[i])) - double(__half2float(y[i])));
    worst = std::isfinite(d) ? std::max(worst, d / scale) : 1e30;
  }
  return worst;
}

int Run(const anvil::crosscheck::Row& r) {
  if (g_cond.early) AttachCupti(), g_cond.cupti = true;
  void* lib = dlopen(r.library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) return std::fprintf(stderr, "cannot load %s: %s\n", r.library.c_str(), dlerror()), 2;
  auto gemm = reinterpret_cast<GemmFn>(dlsym(lib, "anvil_gemm"));
  auto wsfn = reinterpret_cast<WsFn>(dlsym(lib, "anvil_workspace_bytes"));
  if (!gemm || !wsfn) return std::fprintf(stderr, "%s lacks the candidate ABI\n", r.library.c_str()), 2;
  cudaDeviceProp prop;
  CC_CHECK(cudaGetDeviceProperties(&prop, 0));
  Timer t{r, nullptr, {}, 4, [] {}, {}};
  CC_CHECK(cudaStreamCreateWithFlags(&t.stream, cudaStreamNonBlocking));
  const double set_bytes = 2.0 * (double(r.m) * r.k + double(r.n) * r.k + double(r.m) * r.n);
  const int cold_sets = std::max(2, int(std::ceil(3.0 * prop.l2CacheSize / set_bytes)) + 1);
  for (int s = 0; s <= cold_sets; ++s) t.sets.push_back(Allocate(r, 1234u + s));
  void* ws = nullptr;
  const size_t ws_bytes = wsfn(r.m, r.n, r.k);
  if (ws_bytes) CC_CHECK(cudaMalloc(&ws, ws_bytes));
  CC_CHECK(cudaDeviceSynchronize());
  cublasHandle_t blas;
  CC_CHECK(cublasCreate(&blas));
  Lt lt(r);
  Call cand = [&](const __half* a, const __half* b, __half* c, cudaStream_t s) {
    if (gemm(a, b, c, r.m, r.n, r.k, ws, s) != 0) std::fprintf(stderr, "candidate returned an error\n"), std::exit(3);
  };
  Call cublas = [&](const __half* a, const __half* b, __half* c, cudaStream_t s) {
    const float one = 1, zero = 0;
    CC_CHECK(cublasSetStream(blas, s));
    CC_CHECK(cublasGemmEx(blas, r.nt ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, r.n, r.m, r.k, &one,
                          b, CUDA_R_16F, r.nt ? r.k : r.n, a, CUDA_R_16F, r.k, &zero, c, CUDA_R_16F,
                          r.n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  };
  if (g_cond.audit || g_cond.finalize) g_cond.cupti = true;
  if (g_cond.cupti || g_cond.cupti_on || g_cond.cupti_toggle) {
    if (!g_cond.early) AttachCupti();  // --cupti-early attached it first thing
    CuptiActivity(true);
  } else if (g_cond.trace) {
    AttachCupti();
  }
  if (g_cond.audit) Callbacks(true);
  cudaStream_t side = nullptr;
  float* c32 = nullptr;
  std::function<void()> reference = [] {};
  if (g_cond.reference) {
    CC_CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
    CC_CHECK(cudaMalloc(&c32, size_t(r.m) * r.n * 4));
    reference = [&] {
      const float one = 1, zero = 0;
      CC_CHECK(cublasSetStream(blas, side));
      CC_CHECK(cublasGemmEx(blas, r.nt ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, r.n, r.m, r.k, &one,
                            t.sets[0].b, CUDA_R_16F, r.nt ? r.k : r.n, t.sets[0].a, CUDA_R_16F, r.k,
                            &zero, c32, CUDA_R_32F, r.n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      CC_CHECK(cudaStreamSynchronize(side));
    };
    reference();
  }
  const double err = CompareOutputs(r, cand, cublas, t);
  if (err > 2e-2) return std::fprintf(stderr, "candidate output differs from cuBLAS by %g\n", err), 3;
  double slowest = std::max(t.EagerUs(cand), t.EagerUs(cublas));
  t.calls = std::clamp(int(std::ceil(2000.0 / slowest)), 4, 4096);
  t.calls = (t.calls + cold_sets - 1) / cold_sets * cold_sets;
  if (g_cond.audit) Callbacks(false);
  if (!g_cond.cupti_on && (g_cond.cupti || g_cond.cupti_toggle)) CuptiActivity(false);
  if (g_cond.finalize) {
    CC_CHECK(cuptiUnsubscribe(g_sub));
    CC_CHECK(cuptiFinalize());
  }
  void* flush = nullptr;
  const size_t flush_bytes = 2 * size_t(prop.l2CacheSize);
  if (g_cond.regenerate) CC_CHECK(cudaMalloc(&flush, flush_bytes));
  unsigned regen_seed = 99;
  for (bool cold : {false, true}) {
    if (g_cond.regenerate) {
      t.before_sample = [&, cold] {
        if (cold) {
          CC_CHECK(cudaMemsetAsync(flush, int(regen_seed++ & 0xff), flush_bytes, t.stream));
        } else {
          Fill(t.sets[0].a, size_t(r.m) * r.k, regen_seed++);
          Fill(t.sets[0].b, size_t(r.n) * r.k, regen_seed++);
        }
        CC_CHECK(cudaStreamSynchronize(t.stream));
      };
    }
    // cuBLASLt autotuned in this regime: each algorithm once, the best three again.
    std::vector<std::pair<double, int>> tried;
    for (int i = 0; i < int(lt.algos.size()); ++i) {
      cudaGraphExec_t g = t.Capture(lt.With(i), cold);
      tried.push_back({t.SampleOf(g), i});
      cudaGraphExecDestroy(g);
    }
    std::sort(tried.begin(), tried.end());
    tried.resize(std::min<size_t>(3, tried.size()));
    std::vector<Call> impls = {cand, cublas, lt.With(0)};
    for (const auto& [us, i] : tried) impls.push_back(lt.With(i));
    std::vector<cudaGraphExec_t> graphs;
    for (const Call& c : impls) graphs.push_back(t.Capture(c, cold));
    std::vector<std::vector<double>> us(impls.size());
    for (int s = 0; s < kSamples; ++s) {
      reference();
      if (g_cond.cupti_toggle) {
        CuptiActivity(true);
        cublas(t.sets[0].a, t.sets[0].b, t.sets[0].c, t.stream);
        CC_CHECK(cudaStreamSynchronize(t.stream));
        CuptiActivity(false);
      }
      for (size_t j = 0; j < graphs.size(); ++j) {
        const size_t i = (j + s) % graphs.size();
        us[i].push_back(t.SampleOf(graphs[i]));
      }
    }
    if (g_cond.trace) {
      const char* names[] = {"candidate", "cublas", "cublaslt_heuristic"};
      for (size_t i = 0; i < graphs.size(); ++i) {
        const std::string name = i < 3 ? names[i] : "cublaslt_auto_" + std::to_string(i - 3);
        TraceReplay(t, graphs[i], cold ? "graph-cold" : "graph-hot", name.c_str());
      }
      if (g_cond.cupti_on) CuptiActivity(true);
    }
    for (cudaGraphExec_t g : graphs) cudaGraphExecDestroy(g);
    double lt_auto = 1e30;
    for (size_t i = 3; i < us.size(); ++i) lt_auto = std::min(lt_auto, Median(us[i]));
    const double ours = Median(us[0]), cb = Median(us[1]), lh = Median(us[2]);
    const double ratio = std::min({cb, lh, lt_auto}) / ours;
    const double runner = cold ? r.runner_cold : r.runner_hot;
    std::printf("%d,%d,%d,%s,%s,%.3f,%.3f,%.3f,%.3f,%.4f,%.4f,%s\n", r.m, r.n, r.k,
                r.nt ? "nt" : "nn", cold ? "graph-cold" : "graph-hot", ours, cb, lh, lt_auto, ratio,
                runner, anvil::crosscheck::Agrees(ratio, runner, 0.03) ? "yes" : "no");
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("Times a built candidate and the cuBLAS family in the graph regimes, "
               "independently of the runner; one plan row per process.");
  std::string plan;
  int row = 0;
  app.add_option("--plan", plan, "CSV: m,n,k,layout,library,runner_graph_cold,runner_graph_hot")
      ->required();
  app.add_option("--row", row, "which data row of the plan (0-based)")->required();
  app.add_flag("--cupti", g_cond.cupti,
               "attach CUPTI as the runner does: kernel activity on around the eager calls, "
               "off while timing");
  app.add_flag("--cupti-early", g_cond.early,
               "as --cupti, but CUPTI attached before the first CUDA call (before the context exists)");
  app.add_flag("--cupti-on", g_cond.cupti_on, "attach CUPTI and leave kernel activity on while timing");
  app.add_flag("--audit", g_cond.audit,
               "attach CUPTI with API callbacks of both domains on around the eager calls (the "
               "runner's correctness audit)");
  app.add_flag("--finalize", g_cond.finalize, "attach CUPTI, then detach it (cuptiFinalize) before timing");
  app.add_flag("--cupti-toggle", g_cond.cupti_toggle,
               "attach CUPTI and switch kernel activity on and off around one eager call before "
               "each round of samples, with the graphs alive (the runner's device samples do)");
  app.add_option("--replays", g_cond.replays, "replays between the two events (runner: 1)")
      ->check(CLI::Range(1, 100));
  app.add_option("--lead", g_cond.lead, "untimed replays launched just before the first event (runner: 1)")
      ->check(CLI::Range(0, 10));
  app.add_flag("--normal", g_cond.normal, "inputs drawn from N(0, 1), as the runner's");
  app.add_flag("--reference", g_cond.reference,
               "an fp32-output GEMM through the same cuBLAS handle on a second stream first and "
               "before every round (the runner's reference)");
  app.add_flag("--regenerate", g_cond.regenerate,
               "before each sample rewrite the hot set's A and B, and flush L2 in the cold regime");
  app.add_flag("--trace", g_cond.trace,
               "after the samples, one more replay per implementation watched by CUPTI: kernel "
               "duration and gap between kernels (stderr: trace,regime,impl,kernels,kernel_us,gap_us,span_us)");
  app.add_flag("--per-impl-calls", g_cond.per_impl,
               "size N per implementation from its own eager call (runner), not one N for all");
  CLI11_PARSE(app, argc, argv);
  std::ifstream in(plan);
  if (!in) return std::fprintf(stderr, "cannot read %s\n", plan.c_str()), 2;
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<std::vector<anvil::crosscheck::Row>> rows = anvil::crosscheck::ParsePlan(text.str());
  if (!rows.ok()) return std::fprintf(stderr, "%s\n", std::string(rows.status().message()).c_str()), 2;
  if (row < 0 || row >= int(rows->size())) return std::fprintf(stderr, "no row %d\n", row), 2;
  return Run((*rows)[row]);
}
