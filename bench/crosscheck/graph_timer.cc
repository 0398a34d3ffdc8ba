#include "bench/crosscheck/graph_timer.h"

#include <cupti.h>

#include <algorithm>
#include <cmath>
#include <utility>

namespace anvil::crosscheck {

Conditions g_cond;

namespace {

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

CUpti_SubscriberHandle g_sub = nullptr;

}  // namespace

void CuptiActivity(bool on) {
  for (CUpti_ActivityKind k : {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMSET,
                               CUPTI_ACTIVITY_KIND_MEMCPY}) {
    CC_CHECK(on ? cuptiActivityEnable(k) : cuptiActivityDisable(k));
  }
  if (!on) CC_CHECK(cuptiActivityFlushAll(1));
}

void AttachCupti() {
  CC_CHECK(cuptiActivityRegisterCallbacks(CuptiBuffer, CuptiDone));
  CC_CHECK(cuptiSubscribe(&g_sub, CuptiApi, nullptr));
}

void Callbacks(bool on) {
  for (CUpti_CallbackDomain d : {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_CB_DOMAIN_DRIVER_API}) {
    CC_CHECK(cuptiEnableDomain(on ? 1 : 0, g_sub, d));
  }
}

void DetachCupti() {
  CC_CHECK(cuptiUnsubscribe(g_sub));
  CC_CHECK(cuptiFinalize());
}

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

Operands Allocate(const Row& r, unsigned seed) {
  Operands o;
  const size_t na = size_t(r.m) * r.k, nb = size_t(r.n) * r.k, nc = size_t(r.m) * r.n;
  CC_CHECK(cudaMalloc(&o.a, na * 2));
  CC_CHECK(cudaMalloc(&o.b, nb * 2));
  CC_CHECK(cudaMalloc(&o.c, nc * 2));
  Fill(o.a, na, seed);
  Fill(o.b, nb, seed * 7 + 1);
  return o;
}

Lt::Lt(const Row& r) {
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

Call Lt::With(int i) {
  const cublasLtMatmulAlgo_t* algo = &algos[i].algo;
  return [this, algo](const __half* a, const __half* b, __half* c, cudaStream_t s) {
    const float one = 1, zero = 0;
    CC_CHECK(cublasLtMatmul(h, desc, &one, b, lb, a, la, &zero, c, lc, c, lc, algo, ws, ws_bytes, s));
  };
}

double Timer::Sample(cudaGraphExec_t exec) {
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

cudaGraphExec_t Timer::Capture(const Call& call, bool cold) {
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

double Timer::SampleOf(cudaGraphExec_t exec) {
  const int shared = calls;
  calls = calls_of[exec];
  const double us = Sample(exec);
  calls = shared;
  return us;
}

cudaGraphExec_t Timer::CaptureN(const Call& call, bool cold) {
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

double Timer::EagerUs(const Call& call) {
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

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

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

double CompareOutputs(const Row& r, const Call& cand, const Call& ref, Timer& t) {
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

}  // namespace anvil::crosscheck
