// ProblemSession: evaluates one candidate on one problem, as docs/DESIGN.md's
// Correctness, Timing and Reward-hacking sections require:
//   checks.cc  - audited calls, correctness checks, cheat detection
//   timing.cc  - the eager timing figures, interleaved with the baselines
//   graph_timing.cc - the graph-replay figures in the hot and cold regimes
//   lt_tuning.cc - cuBLASLt autotuned, in each figure it is compared by
//   session.cc - buffers, baselines, the order of the steps, the result
// A screen (ctx.plan, protocol.h) takes the same steps with fewer figures and
// rounds; the first screen of a problem in the process leaves the baselines'
// records in ctx.screened (and the host keeps them for its later processes),
// and the later ones copy them instead of setting up or calling any baseline.
// Reference results are computed only after the candidate's call has finished
// and from pristine copies of the inputs, so a candidate never sees one for
// inputs it is being asked about. Inputs are regenerated before every timed
// call, so a cached output cannot pass. Each timing round of each
// implementation uses one of several operand sets, so every figure is taken at
// several places in device memory. Not thread-safe.
#ifndef ANVIL_WORKER_RUNNER_SESSION_H_
#define ANVIL_WORKER_RUNNER_SESSION_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "anvil/v1/runner.pb.h"
#include "anvil/v1/types.pb.h"
#include "worker/runner/baseline_cache.h"
#include "worker/runner/cupti_monitor.h"
#include "worker/runner/cuda_util.h"
#include "worker/runner/device_ops.h"
#include "worker/runner/gemm_impls.h"
#include "worker/runner/protocol.h"

namespace anvil::runner {

// Handles and facts shared by every problem of one runner process.
struct RunnerContext {
  cublasHandle_t cublas = nullptr;
  cublasLtHandle_t lt = nullptr;
  CuptiMonitor* monitor = nullptr;
  // The process's one stream: every call, the runner's own input generation,
  // checks and copies, and the ceilings. Memsets on a second stream after the
  // ceilings' large copies left every later launch in a CUDA graph about
  // 0.17 us slower, which the vendor's kernels pay and ours (programmatic
  // dependent launch) hide: short shapes' graph speedups read 4-12% high
  // (bench/results/2026-11-27-launch-gap-h100.md).
  cudaStream_t stream = nullptr;
  v1::RunnerProtocol protocol;  // defaults filled in
  MeasurePlan plan;             // PlanFor(protocol)
  BaselineCache screened;       // the baselines of each problem screened so far
  v1::Ceilings ceilings;
  std::string gpu;              // normalised model name, for LtAlgo cache entries
  std::string cublas_version;
  int sm_count = 0;
  int64_t l2_bytes = 0;         // sizes the graph-cold operand sets
  uint64_t seed = 0;
  DeviceMemory flush;           // protocol.flush_bytes, written to evict L2
  // Called once per problem, after the baselines are set up and before the
  // candidate's first call, with the slowest baseline's call time (us; 0
  // without baselines) and the number of baselines: the worker scales the
  // problem's time limit with them.
  std::function<void(double reference_call_us, int baselines)> on_problem_start;
};

// Threads of this process now (host threads a candidate starts show here).
int CountThreads();
// Host steady clock in microseconds.
double NowUs();

// Why a candidate failed; the Measurement carries it.
struct Failure {
  v1::Verdict verdict;
  std::string reason;
  std::string detail;
};

// Cached cuBLASLt choices for one problem, by the figure each was tuned by
// (null: none cached).
struct LtCached {
  const v1::LtAlgo* device = nullptr;
  const v1::LtAlgo* hot = nullptr;
  const v1::LtAlgo* cold = nullptr;
};

class ProblemSession {
 public:
  // REQUIRES: ctx outlives the session.
  ProblemSession(RunnerContext& ctx, const CandidateLibrary& lib, GemmShape shape)
      : ctx_(ctx), lib_(lib), shape_(shape) {}
  ~ProblemSession();

  // The measurement of this problem; a candidate's failure is data in it. A
  // non-OK status means the runner itself failed. `cached` are tuned cuBLASLt
  // choices for this problem; new choices land in *tuned (one per figure).
  absl::StatusOr<v1::Measurement> Run(const LtCached& cached, std::vector<v1::LtAlgo>* tuned);
  // True once the candidate left a sticky CUDA error: the process must end.
  bool context_lost() const { return context_lost_; }

 private:
  enum class Inputs { kNormal, kExact01, kLargeSums };
  struct AuditedOutcome;
  struct Operands { GuardedBuffer a, b, c; };  // one set of the candidate's operands

  // session.cc
  absl::Status Allocate();
  absl::Status SetUpBaselines(const LtCached& cached, std::vector<v1::LtAlgo>* tuned);
  absl::Status Regenerate();
  // Host time of one call plus a device sync of the slowest baseline (us).
  absl::StatusOr<double> SlowestBaselineCallUs();
  // Operand set k (modulo the number of sets) becomes the current one.
  void UseOperandSet(size_t k) { set_ = k % sets_.size(); }
  // The current operand set.
  GuardedBuffer& a() { return sets_[set_].a; }
  GuardedBuffer& b() { return sets_[set_].b; }
  GuardedBuffer& c() { return sets_[set_].c; }
  absl::Status Guard(const Operands& o);  // sets every guard byte of `o`
  absl::Status PoisonAndGuard();
  // One call of `impl` on the current operand set, on the caller's stream.
  int Call(GemmImpl& impl);
  absl::Status FlushL2(int pattern);  // evicts L2 (the flush buffer), waits for it
  void Fill(v1::Measurement& m) const;
  void FillTimings(size_t i, v1::Timings* t) const;  // implementation i's samples
  // Baseline i's record (i >= 1, an index of impls_), as Fill writes it.
  v1::Baseline BaselineRecord(size_t i) const;
  // A screen's baselines, once every round has timed them, into ctx.screened.
  void CacheBaselines();
  void ProfileCounters(v1::Measurement& m);
  // checks.cc
  absl::StatusOr<std::optional<Failure>> CheckCorrectness(v1::Measurement& m);
  absl::StatusOr<std::optional<Failure>> CheckOnce(Inputs kind, bool first, v1::Measurement& m);
  absl::StatusOr<AuditedOutcome> AuditedCall();
  absl::StatusOr<std::optional<Failure>> JudgeCall(const AuditedOutcome& o);
  absl::StatusOr<std::optional<Failure>> JudgeOutput(Inputs kind, double* rel_err,
                                                     double* excess_err);
  // The values of C against the reference of the pristine inputs (a0_, b0_).
  absl::StatusOr<std::optional<Failure>> JudgeValues(const __half* c, Inputs kind, double* rel_err,
                                                     double* excess_err);
  absl::StatusOr<CompareStats> CompareWithReference(const __half* c);
  absl::StatusOr<std::optional<Failure>> CheckTimedOutput(const char* when);
  absl::StatusOr<std::optional<Failure>> CheckGraphCapture(v1::Measurement& m);
  absl::StatusOr<std::optional<Failure>> CheckNoSkippedWork(v1::Measurement& m);
  absl::Status MeasureBaselineErrors();
  double ExcessThreshold() const;
  std::optional<Failure> CheckStreams(const std::vector<Activity>& acts) const;
  // timing.cc
  struct DeviceCall {
    int rc = 0;                      // the implementation's return code
    cudaError_t err = cudaSuccess;   // the device sync's
    std::vector<Activity> acts;      // every kernel, memset and copy it started
    double us() const;               // their summed device time
  };
  // One call of `impl` on the current inputs, timed by CUPTI around the call
  // and a device sync.
  absl::StatusOr<DeviceCall> TimedDeviceCall(GemmImpl& impl);
  absl::StatusOr<std::optional<Failure>> TimeAll(v1::Measurement& m);
  absl::StatusOr<std::optional<Failure>> TimeRound(GemmImpl& impl, size_t index, bool check);
  absl::StatusOr<std::optional<Failure>> Warmup(GemmImpl& impl);
  absl::StatusOr<std::optional<Failure>> DeviceSamples(GemmImpl& impl, size_t index, bool check);
  // graph_timing.cc
  struct Graph {  // an instantiated graph of `calls` back-to-back calls
    Graph() = default;
    Graph(Graph&& o) noexcept;
    Graph& operator=(Graph&& o) noexcept;
    ~Graph();
    cudaGraphExec_t exec = nullptr;
    int calls = 0;
    size_t set = 0;  // hot: the operand set its calls read and write
  };
  struct ImplGraphs {  // one implementation's graphs, captured at its first graph round
    bool tried = false;
    std::optional<Graph> hot, cold;
    int hot_calls = 0, cold_calls = 0;  // kept after the graphs are released
    bool hot_audited = false, cold_audited = false;
    std::string why_not;                // a capture that failed, for graph_note
  };
  struct ColdSets {  // the graph-cold operands: slices of one pool per operand
    DeviceMemory a, b, c;
    size_t a_stride = 0, b_stride = 0, c_stride = 0;  // bytes between sets
    int sets = 0;
  };
  absl::Status AllocateColdSets();
  const __half* ColdA(int s) const;
  const __half* ColdB(int s) const;
  __half* ColdC(int s) const;
  int GraphCalls(double call_us, bool cold) const;
  // An empty Graph (exec null) with *why set when the call cannot be captured.
  void CountNodes(cudaGraph_t graph, const std::string& impl, bool cold, int calls);
  absl::StatusOr<Graph> CaptureGraph(GemmImpl& impl, bool cold, int calls, std::string* why);
  absl::Status CaptureGraphs(size_t index);
  absl::Status RegenerateCold(int check);
  absl::Status PrepareReplay(const Graph& g, bool cold, int check);
  absl::StatusOr<std::optional<Failure>> Launch(GemmImpl& impl, const Graph& g, double* us);
  absl::StatusOr<std::optional<Failure>> Replay(GemmImpl& impl, const Graph& g, bool cold,
                                                int check, double* us);
  absl::StatusOr<std::optional<Failure>> WatchedReplay(size_t index, const Graph& g, bool cold,
                                                       std::vector<Activity>* acts);
  absl::StatusOr<std::optional<Failure>> AuditReplay(const Graph& g, bool cold);
  absl::StatusOr<std::optional<Failure>> GraphSamples(size_t index, bool check);
  absl::StatusOr<std::optional<Failure>> CheckColdOutput(int s);
  void ReleaseGraphs();
  std::string GraphNote() const;
  // lt_tuning.cc
  absl::Status TuneLt(LtGemm& lt, const LtCached& cached, std::vector<v1::LtAlgo>* tuned);
  absl::Status TuneLtScreen(LtGemm& lt, const LtCached& cached, std::vector<v1::LtAlgo>* tuned);
  absl::StatusOr<int> TuneLtDevice(LtGemm& lt, const std::vector<cublasLtMatmulAlgo_t>& algos,
                                   int rounds, std::vector<double>* medians);
  absl::StatusOr<int> TuneLtGraph(LtGemm& lt, const std::vector<cublasLtMatmulAlgo_t>& algos,
                                  const std::vector<double>& device_us, bool cold);
  static std::optional<cublasLtMatmulAlgo_t> UsableCached(LtGemm& lt, const v1::LtAlgo* cached);
  v1::LtAlgo TunedChoice(const cublasLtMatmulAlgo_t& algo, const std::string& figure) const;
  absl::StatusOr<std::optional<Failure>> HostSamples(GemmImpl& impl, size_t index);
  std::optional<Failure> RunFailed(GemmImpl& impl, int rc, cudaError_t err);

  RunnerContext& ctx_;
  const CandidateLibrary& lib_;
  GemmShape shape_;
  size_t a_n_ = 0, b_n_ = 0, c_n_ = 0;
  // The candidate's operands: protocol.operand_sets sets (fewer where they
  // would pass protocol.max_operand_bytes), each at its own place in device
  // memory, since a kernel's speed can depend on where its operands lie.
  std::vector<Operands> sets_;
  size_t set_ = 0;                           // the current one
  DeviceMemory a0_, b0_, c_snap_, ref_, ws_, lt_ws_, counters_;
  size_t ws_bytes_ = 0;
  cudaStream_t stream_ = nullptr;            // ctx.stream: handed to every call, and the runner's own
  cudaEvent_t ev0_ = nullptr, ev1_ = nullptr;
  std::vector<std::unique_ptr<GemmImpl>> impls_;  // [0] candidate, then baselines
  // A screen of a problem screened before in this process, or by an earlier
  // process of the host: its baselines' records (impls_ holds the candidate
  // only); else null.
  const v1::ScreenedBaselines* screened_ = nullptr;
  double reference_call_us_ = 0;             // as sent in ProblemStart
  struct Samples {
    std::vector<double> device, cold, warm, call, graph_hot, graph_cold;
    double first = 0;
  };
  std::vector<Samples> samples_;             // per impl
  std::vector<std::vector<std::string>> kernels_;  // per impl, names seen
  std::vector<int> kernels_per_call_;        // candidate's activity counts
  std::vector<double> baseline_rel_err_;     // per impl, on the first normal inputs
  double baseline_excess_ = 0;               // worst vendor error beyond rounding
  ApiAudit audit_total_;                     // candidate's API use over audited calls
  int audited_calls_ = 0;
  int lt_auto_index_ = -1;
  LtGemm* lt_auto_ = nullptr;                // the autotuned baseline (in impls_)
  cublasLtMatmulAlgo_t lt_device_algo_{};   // its choice by device time...
  std::optional<cublasLtMatmulAlgo_t> lt_regime_algo_[2];  // ...and per graph regime (hot, cold)
  int lt_regime_index_[2] = {-1, -1};
  ColdSets cold_;
  std::vector<ImplGraphs> graphs_;           // per impl
  std::map<std::string, double> extra_profile_;  // written into the measurement's profile
  uint32_t stream_id_ = 0;
  uint64_t next_seed_ = 0;
  int64_t free_before_ = 0;
  bool context_lost_ = false;
};

}  // namespace anvil::runner

#endif  // ANVIL_WORKER_RUNNER_SESSION_H_
