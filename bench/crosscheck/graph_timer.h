// The cross-check's timer (crosscheck.cc says the method): operand sets, the
// cuBLASLt calls, CUDA graphs of N calls and their replays timed by events,
// and the runner's conditions it can put back (CUPTI attached, inputs from
// N(0, 1), N per implementation, ...). One process, one thread: nothing
// here is thread-safe, and a CUDA error ends the process (CC_CHECK).
#ifndef ANVIL_BENCH_CROSSCHECK_GRAPH_TIMER_H_
#define ANVIL_BENCH_CROSSCHECK_GRAPH_TIMER_H_

#include <cublasLt.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <vector>

#include "bench/crosscheck/plan.h"

#define CC_CHECK(x)                                                          \
  do {                                                                       \
    auto e_ = (x);                                                           \
    if (static_cast<int>(e_) != 0) {                                         \
      std::fprintf(stderr, "%s:%d %s failed: %d\n", __FILE__, __LINE__, #x, \
                   static_cast<int>(e_));                                    \
      std::exit(1);                                                          \
    }                                                                        \
  } while (0)

namespace anvil::crosscheck {

// One implementation's call on operands A, B into C on a stream.
using Call = std::function<void(const __half*, const __half*, __half*, cudaStream_t)>;

// Which of the runner's conditions to reproduce (all off: crosscheck.cc's method).
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
extern Conditions g_cond;  // set from the command line before anything runs

// CUPTI: callbacks registered and a subscriber (AttachCupti); kernel, memset
// and memcpy activity on or off (off flushes the records); API callbacks of
// both domains on or off; detached (unsubscribed, finalized).
void AttachCupti();
void CuptiActivity(bool on);
void Callbacks(bool on);
void DetachCupti();

// Uniform values in [-1, 1) from a hash of the index (or N(0, 1) with
// g_cond.normal; never zeros: they run faster than real data), written from the host.
void Fill(__half* p, size_t n, unsigned seed);

struct Operands {
  __half *a, *b, *c;
};
// One operand set of the row's shape, its own cudaMalloc each, A and B filled.
Operands Allocate(const Row& r, unsigned seed);

// cuBLASLt for row-major C = A B^T (nt) or A B (nn): column-major C^T = B' A^T,
// with the heuristic's top 32 algorithms.
struct Lt {
  cublasLtHandle_t h;
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t la, lb, lc;
  void* ws;
  size_t ws_bytes = size_t(64) << 20;
  std::vector<cublasLtMatmulHeuristicResult_t> algos;

  explicit Lt(const Row& r);
  Call With(int i);  // the call with algos[i]; REQUIRES: this outlives it
};

struct Timer {
  const Row& row;
  cudaStream_t stream;
  std::vector<Operands> sets;  // [0] is the hot set
  int calls = 4;

  std::function<void()> before_sample = [] {};
  // Per-call time of one sample: R replays of the graph between two events.
  double Sample(cudaGraphExec_t exec);
  // With per_impl, N for this implementation alone (a replay of about 1 ms);
  // else the shared N.
  cudaGraphExec_t Capture(const Call& call, bool cold);
  std::map<cudaGraphExec_t, int> calls_of;
  double SampleOf(cudaGraphExec_t exec);
  cudaGraphExec_t CaptureN(const Call& call, bool cold);
  double EagerUs(const Call& call);
};

double Median(std::vector<double> v);

// One replay watched by CUPTI: kernels, median duration, median gap from one
// kernel's end to the next one's start (negative: overlap), wall time per
// kernel. On stderr: trace,regime,impl,kernels,kernel_us,gap_us,span_us.
void TraceReplay(Timer& t, cudaGraphExec_t exec, const char* regime, const char* impl);

// Largest |x - y| / max|y| between the candidate's and cuBLAS's outputs.
double CompareOutputs(const Row& r, const Call& cand, const Call& ref, Timer& t);

}  // namespace anvil::crosscheck

#endif  // ANVIL_BENCH_CROSSCHECK_GRAPH_TIMER_H_
