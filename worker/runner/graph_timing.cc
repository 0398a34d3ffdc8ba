// Graph-replay figures of ProblemSession (see session.h), what a deployment
// pays: an implementation's call captured `calls` times back to back in a CUDA
// graph (calls sized so a replay lasts about protocol.graph_replay_us), the
// graph replayed between two events on the caller's stream, time per call =
// replay time / calls (the replay timed is the second of two back to back).
// Two named cache regimes:
//   hot   every call on one operand set (the round's guarded set), so what
//         fits stays in L2: a GEMM in a loop on the same data;
//   cold  call j on cold set j mod S, S sets together over
//         protocol.graph_cold_l2_multiple times the L2 (and at least two when
//         they fit), L2 flushed before each replay: weights streamed from
//         DRAM, as in a decoding step where every layer has its own weights.
// Every replay runs on freshly generated inputs; the first replay of each
// round checks its output (hot: the guarded set's C; cold: a set chosen after
// capture), and the candidate's first replay in each regime is watched by
// CUPTI: a graph doing less than half the GPU work of its calls made eagerly
// is a cheat (a call that launches only once per pointer triple would
// otherwise time as 1/N of itself).
// A watched replay also records where its time per call went (replay_trace.h);
// with protocol.graph_trace every implementation's first replay per regime is
// watched for that. A screen of a graph figure captures, audits and replays
// its regime only; a screen of another figure, none. A screen's candidate
// stops once its replays are long enough together (ScreenHasEnoughReplays),
// its later rounds taking no replay of the regime (every round that takes
// one still checks its first).
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "worker/runner/replay_trace.h"
#include "worker/runner/session.h"

namespace anvil::runner {

ProblemSession::Graph::~Graph() {
  if (exec) cudaGraphExecDestroy(exec);
}

ProblemSession::Graph::Graph(Graph&& o) noexcept
    : exec(std::exchange(o.exec, nullptr)), calls(o.calls), set(o.set) {}

ProblemSession::Graph& ProblemSession::Graph::operator=(Graph&& o) noexcept {
  std::swap(exec, o.exec);
  calls = o.calls;
  set = o.set;
  return *this;
}

// Slices of one contiguous pool per operand, each slice 256-byte aligned as
// allocations are, so one fill regenerates every set.
absl::Status ProblemSession::AllocateColdSets() {
  auto stride = [](size_t elems) { return (elems * sizeof(__half) + 255) / 256 * 256; };
  cold_.a_stride = stride(a_n_);
  cold_.b_stride = stride(b_n_);
  cold_.c_stride = stride(c_n_);
  const double set_bytes = double(cold_.a_stride + cold_.b_stride + cold_.c_stride);
  const double want = ctx_.protocol.graph_cold_l2_multiple() * double(ctx_.l2_bytes);
  int64_t sets = static_cast<int64_t>(std::floor(want / set_bytes)) + 1;
  sets = std::max<int64_t>(sets, 2);
  sets = std::min<int64_t>(sets, ctx_.protocol.graph_max_calls());
  sets = std::min<int64_t>(sets, std::max<int64_t>(
                                     1, int64_t(ctx_.protocol.max_operand_bytes() / set_bytes)));
  cold_.sets = static_cast<int>(sets);
  for (auto [mem, stride_bytes] : {std::pair{&cold_.a, cold_.a_stride}, {&cold_.b, cold_.b_stride},
                                   {&cold_.c, cold_.c_stride}}) {
    absl::StatusOr<DeviceMemory> got = DeviceMemory::Allocate(stride_bytes * cold_.sets);
    if (!got.ok()) return got.status();
    *mem = std::move(*got);
  }
  return absl::OkStatus();
}

const __half* ProblemSession::ColdA(int s) const {
  return reinterpret_cast<const __half*>(cold_.a.get<char>() + cold_.a_stride * s);
}
const __half* ProblemSession::ColdB(int s) const {
  return reinterpret_cast<const __half*>(cold_.b.get<char>() + cold_.b_stride * s);
}
__half* ProblemSession::ColdC(int s) const {
  return reinterpret_cast<__half*>(cold_.c.get<char>() + cold_.c_stride * s);
}

int ProblemSession::GraphCalls(double call_us, bool cold) const {
  const v1::RunnerProtocol& p = ctx_.protocol;
  int calls = call_us > 0 ? static_cast<int>(std::ceil(p.graph_replay_us() / call_us)) : 4;
  calls = std::clamp(calls, 4, std::max(4, p.graph_max_calls()));
  if (cold) {  // every set once at least, and each equally often
    calls = std::max(calls, cold_.sets);
    calls = (calls + cold_.sets - 1) / cold_.sets * cold_.sets;
  }
  return calls;
}

// What a captured call put in the graph, per call, in the measurement's
// profile: "graph_<regime>_nodes_per_call.<impl>" and, where any, the nodes
// that are not kernels ("..._other_nodes_per_call.<impl>": memsets, copies,
// allocations a library added while captured).
void ProblemSession::CountNodes(cudaGraph_t graph, const std::string& impl, bool cold, int calls) {
  size_t n = 0;
  if (cudaGraphGetNodes(graph, nullptr, &n) != cudaSuccess || calls <= 0) return;
  std::vector<cudaGraphNode_t> nodes(n);
  if (cudaGraphGetNodes(graph, nodes.data(), &n) != cudaSuccess) return;
  int other = 0;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type;
    if (cudaGraphNodeGetType(node, &type) == cudaSuccess && type != cudaGraphNodeTypeKernel) ++other;
  }
  const std::string regime = cold ? "graph_cold" : "graph_hot";
  extra_profile_[absl::StrCat(regime, "_nodes_per_call.", impl)] = double(n) / calls;
  if (other) extra_profile_[absl::StrCat(regime, "_other_nodes_per_call.", impl)] = double(other) / calls;
  // Edges that let a call start before the previous one ends (programmatic
  // dependent launch), per call: 1 where every call overlaps its predecessor.
  size_t e = 0;
  if (cudaGraphGetEdges(graph, nullptr, nullptr, nullptr, &e) != cudaSuccess || e == 0) return;
  std::vector<cudaGraphNode_t> from(e), to(e);
  std::vector<cudaGraphEdgeData> data(e);
  if (cudaGraphGetEdges(graph, from.data(), to.data(), data.data(), &e) != cudaSuccess) return;
  int programmatic = 0;
  for (size_t i = 0; i < e; ++i) programmatic += data[i].type == cudaGraphDependencyTypeProgrammatic;
  extra_profile_[absl::StrCat(regime, "_programmatic_edges_per_call.", impl)] =
      double(programmatic) / calls;
}

absl::StatusOr<ProblemSession::Graph> ProblemSession::CaptureGraph(GemmImpl& impl, bool cold,
                                                                   int calls, std::string* why) {
  Graph g;
  g.calls = calls;
  g.set = set_;
  cudaGraph_t graph = nullptr;
  cudaError_t err = cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal);
  int rc = 0;
  for (int j = 0; j < calls && err == cudaSuccess && rc == 0; ++j) {
    rc = cold ? impl.Run(ColdA(j % cold_.sets), ColdB(j % cold_.sets), ColdC(j % cold_.sets),
                         stream_)
              : Call(impl);
  }
  cudaError_t end = cudaStreamEndCapture(stream_, &graph);
  if (err == cudaSuccess) err = end;
  if (err == cudaSuccess && rc == 0 && graph) CountNodes(graph, impl.name(), cold, calls);
  if (err == cudaSuccess && rc == 0 && graph) err = cudaGraphInstantiate(&g.exec, graph, 0);
  if (err == cudaSuccess && g.exec) err = cudaGraphUpload(g.exec, stream_);
  if (graph) cudaGraphDestroy(graph);
  cudaGetLastError();  // capture failures are not sticky; clear them
  if (rc != 0 || err != cudaSuccess || !g.exec) {
    *why = rc != 0 ? absl::StrCat(impl.name(), " returned ", rc, " while captured")
                   : absl::StrCat(impl.name(), " cannot be captured in a CUDA graph: ",
                                  cudaGetErrorName(err));
    if (g.exec) cudaGraphExecDestroy(std::exchange(g.exec, nullptr));
  }
  ANVIL_CUDA(cudaStreamSynchronize(stream_));
  return g;
}

// Fresh inputs for every cold set, every C poisoned, set `check`'s inputs
// copied aside for the reference; then L2 flushed.
absl::Status ProblemSession::RegenerateCold(int check) {
  ANVIL_CUDA(FillNormal(cold_.a.get<__half>(), cold_.a.bytes() / 2, ++next_seed_ * 0x9E37ull, stream_));
  ANVIL_CUDA(FillNormal(cold_.b.get<__half>(), cold_.b.bytes() / 2, ++next_seed_ * 0x9E37ull, stream_));
  ANVIL_CUDA(FillBits(cold_.c.get<__half>(), cold_.c.bytes() / 2, kPoisonBits, stream_));
  ANVIL_CUDA(cudaMemcpyAsync(a0_.get(), ColdA(check), a_n_ * 2, cudaMemcpyDeviceToDevice, stream_));
  ANVIL_CUDA(cudaMemcpyAsync(b0_.get(), ColdB(check), b_n_ * 2, cudaMemcpyDeviceToDevice, stream_));
  return FlushL2(static_cast<int>(next_seed_));
}

// Fresh inputs for the graph's operands: the cold sets, or the hot graph's own
// operand set (captured in an earlier round, when another set may be current).
absl::Status ProblemSession::PrepareReplay(const Graph& g, bool cold, int check) {
  if (cold) return RegenerateCold(check);
  UseOperandSet(g.set);
  return Regenerate();
}

// Two replays back to back, the second between the events: a replay's host
// submission (tens of microseconds for a graph of many calls) then overlaps
// the first, instead of sitting between an event recorded on an idle stream
// and the graph's first kernel. On the H100 that gap read as 11% of
// cuBLASLt's per-call time on 1000^3 (bench/results/*-graph-regimes-*.md).
absl::StatusOr<std::optional<Failure>> ProblemSession::Launch(GemmImpl& impl, const Graph& g,
                                                              double* us) {
  cudaError_t err = cudaGraphLaunch(g.exec, stream_);
  if (err == cudaSuccess) err = cudaEventRecord(ev0_, stream_);
  if (err == cudaSuccess) err = cudaGraphLaunch(g.exec, stream_);
  if (err == cudaSuccess) err = cudaEventRecord(ev1_, stream_);
  cudaError_t sync = cudaDeviceSynchronize();
  if (std::optional<Failure> f = RunFailed(impl, 0, err != cudaSuccess ? err : sync)) return f;
  float ms = 0;
  ANVIL_CUDA(cudaEventElapsedTime(&ms, ev0_, ev1_));
  *us = ms * 1e3 / g.calls;
  return std::optional<Failure>();
}

absl::StatusOr<std::optional<Failure>> ProblemSession::Replay(GemmImpl& impl, const Graph& g,
                                                              bool cold, int check, double* us) {
  ANVIL_RETURN_IF_ERROR(PrepareReplay(g, cold, check));
  return Launch(impl, g, us);
}

// One replay of implementation `index` watched by CUPTI (the launch only, not
// the input generation): its kernels' durations and gaps go to the profile.
// The records are returned for the candidate's audit.
absl::StatusOr<std::optional<Failure>> ProblemSession::WatchedReplay(size_t index, const Graph& g,
                                                                     bool cold,
                                                                     std::vector<Activity>* acts) {
  CuptiMonitor& mon = *ctx_.monitor;
  ANVIL_RETURN_IF_ERROR(PrepareReplay(g, cold, 0));
  ANVIL_RETURN_IF_ERROR(mon.SetActivity(true));
  uint64_t t0 = mon.Now();
  double us = 0;
  absl::StatusOr<std::optional<Failure>> f = Launch(*impls_[index], g, &us);
  uint64_t t1 = mon.Now();
  ANVIL_RETURN_IF_ERROR(mon.SetActivity(false));
  *acts = mon.Take(t0, t1);
  if (!f.ok() || *f) return f;
  const ReplayTrace t = SummariseReplay(*acts);
  const std::string key = absl::StrCat(cold ? "graph_cold" : "graph_hot", "_trace_");
  const std::string& impl = impls_[index]->name();
  extra_profile_[absl::StrCat(key, "kernel_us.", impl)] = t.kernel_us;
  extra_profile_[absl::StrCat(key, "gap_us.", impl)] = t.gap_us;
  extra_profile_[absl::StrCat(key, "span_us.", impl)] = t.span_us;
  return std::optional<Failure>();
}

// The candidate's watched replay: its GPU work against as many eager calls'.
absl::StatusOr<std::optional<Failure>> ProblemSession::AuditReplay(const Graph& g, bool cold) {
  std::vector<Activity> acts;
  absl::StatusOr<std::optional<Failure>> f = WatchedReplay(0, g, cold, &acts);
  if (!f.ok() || *f) return f;
  double busy = 0;
  for (const Activity& a : acts) busy += a.us();
  std::vector<double> dev = samples_[0].device;
  std::sort(dev.begin(), dev.end());
  const double expected = 2 * g.calls * dev[dev.size() / 2];  // Launch replays twice
  extra_profile_[cold ? "graph_cold_work_ratio" : "graph_hot_work_ratio"] =
      expected > 0 ? busy / expected : 0;
  if (busy < 0.5 * expected) {
    return Failure{v1::VERDICT_CHEAT, "graph_skipped_work",
                   absl::StrCat("a ", cold ? "cold" : "hot", " graph replay of ", g.calls,
                                " calls did ", busy / expected,
                                " of the GPU work of as many eager calls")};
  }
  return cold ? CheckColdOutput(0) : CheckTimedOutput("graph-hot replay");
}

absl::Status ProblemSession::CaptureGraphs(size_t index) {
  GemmImpl& impl = *impls_[index];
  ImplGraphs& ig = graphs_[index];
  ig.tried = true;
  std::vector<double> dev = samples_[index].device;
  std::sort(dev.begin(), dev.end());
  const double call_us = dev.empty() ? 0 : dev[dev.size() / 2];
  for (bool cold : {false, true}) {
    if (!ctx_.plan.Regime(cold)) continue;  // a screen captures its figure's regime only
    const bool swap_algo = &impl == lt_auto_ && lt_regime_algo_[cold].has_value();
    if (swap_algo) lt_auto_->set_algo(*lt_regime_algo_[cold]);
    std::string why;
    absl::StatusOr<Graph> g = CaptureGraph(impl, cold, GraphCalls(call_us, cold), &why);
    if (swap_algo) lt_auto_->set_algo(lt_device_algo_);
    if (!g.ok()) return g.status();
    if (g->exec) {
      (cold ? ig.cold_calls : ig.hot_calls) = g->calls;
      (cold ? ig.cold : ig.hot) = std::move(*g);
    } else {
      ig.why_not = why;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<Failure>> ProblemSession::GraphSamples(size_t index, bool check) {
  if (ctx_.protocol.graph_samples() <= 0) return std::optional<Failure>();
  if (!graphs_[index].tried) ANVIL_RETURN_IF_ERROR(CaptureGraphs(index));
  ImplGraphs& ig = graphs_[index];
  for (bool cold : {false, true}) {
    if (!ctx_.plan.Regime(cold)) continue;
    const std::optional<Graph>& g = cold ? ig.cold : ig.hot;
    if (!g) continue;
    bool& audited = cold ? ig.cold_audited : ig.hot_audited;
    if (check && !audited) {
      audited = true;
      absl::StatusOr<std::optional<Failure>> f = AuditReplay(*g, cold);
      if (!f.ok() || *f) return f;
    } else if (!check && !audited && ctx_.protocol.graph_trace()) {
      audited = true;
      std::vector<Activity> acts;
      absl::StatusOr<std::optional<Failure>> f = WatchedReplay(index, *g, cold, &acts);
      if (!f.ok() || *f) return f;
    }
    std::vector<double>& out = cold ? samples_[index].graph_cold : samples_[index].graph_hot;
    for (int s = 0; s < ctx_.protocol.graph_samples(); ++s) {
      if (index == 0 && ScreenHasEnoughReplays(ctx_.protocol, ctx_.plan, out, g->calls)) break;
      const int check_set = static_cast<int>(next_seed_ % cold_.sets);
      double us = 0;
      absl::StatusOr<std::optional<Failure>> f = Replay(*impls_[index], *g, cold, check_set, &us);
      if (!f.ok() || *f) return f;
      out.push_back(us);
      if (!check || s != 0) continue;
      f = cold ? CheckColdOutput(check_set) : CheckTimedOutput("graph-hot replay");
      if (!f.ok() || *f) return f;
    }
  }
  return std::optional<Failure>();
}

void ProblemSession::ReleaseGraphs() {
  for (ImplGraphs& ig : graphs_) ig.hot.reset(), ig.cold.reset();
}

// Cold set `s` after a replay: its inputs unchanged, its C the product of them.
absl::StatusOr<std::optional<Failure>> ProblemSession::CheckColdOutput(int s) {
  auto* count = counters_.get<unsigned long long>() + 64;
  ANVIL_CUDA(cudaMemsetAsync(count, 0, sizeof(*count), stream_));
  ANVIL_CUDA(CountDiffs(ColdA(s), a0_.get<__half>(), a_n_, count, stream_));
  ANVIL_CUDA(CountDiffs(ColdB(s), b0_.get<__half>(), b_n_, count, stream_));
  unsigned long long changed = 0;
  ANVIL_CUDA(cudaMemcpyAsync(&changed, count, sizeof(changed), cudaMemcpyDeviceToHost, stream_));
  ANVIL_CUDA(cudaStreamSynchronize(stream_));
  if (changed) {
    return Failure{v1::VERDICT_INCORRECT, "input_modified",
                   absl::StrCat(changed, " elements of A or B changed in a graph-cold replay")};
  }
  absl::StatusOr<std::optional<Failure>> f = JudgeValues(ColdC(s), Inputs::kNormal, nullptr, nullptr);
  if (!f.ok() || !*f) return f;
  (*f)->reason = "timed_output_mismatch";
  (*f)->detail = absl::StrCat("output of a timed call (graph-cold replay) is wrong: ", (*f)->detail);
  return f;
}

// Note for the measurement: which implementations have no graph figure, and
// why (a screen's cached baselines: as the first screen of the problem found).
std::string ProblemSession::GraphNote() const {
  std::string note;
  for (size_t i = 0; i < graphs_.size(); ++i) {
    if (graphs_[i].why_not.empty()) continue;
    absl::StrAppend(&note, note.empty() ? "" : "; ", graphs_[i].why_not);
  }
  if (screened_ && !screened_->graph_note().empty()) {
    absl::StrAppend(&note, note.empty() ? "" : "; ", screened_->graph_note());
  }
  return note;
}

}  // namespace anvil::runner
