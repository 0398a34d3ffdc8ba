// Timing of ProblemSession (see session.h): the candidate and the baselines
// are measured in interleaved rounds, each round taking every figure (the
// graph replays' in graph_timing.cc) for every implementation in a rotated order, so the GPU's power state moves
// them all alike; implementation i's round r runs on operand set i + r, so
// over the rounds each meets every placement of its operands alike. A screen
// (ctx.plan) takes only its figure, plus the candidate's device time, which
// the audits compare against, and the baselines' where it sizes their graphs.
#include <algorithm>
#include <random>

#include "absl/strings/str_cat.h"
#include "worker/runner/session.h"

namespace anvil::runner {
namespace {

void AddUnique(std::vector<std::string>& names, const std::string& name) {
  if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
}

}  // namespace

std::optional<Failure> ProblemSession::RunFailed(GemmImpl& impl, int rc, cudaError_t err) {
  if (err != cudaSuccess) {
    if (&impl == impls_[0].get()) context_lost_ = true;
    return Failure{v1::VERDICT_CRASHED, "cuda_error",
                   absl::StrCat(impl.name(), ": ", cudaGetErrorName(err), " during timing")};
  }
  if (rc != 0) {
    return Failure{v1::VERDICT_UNSUPPORTED, "returned_error",
                   absl::StrCat(impl.name(), " returned ", rc, " during timing")};
  }
  return std::nullopt;
}

absl::StatusOr<std::optional<Failure>> ProblemSession::Warmup(GemmImpl& impl) {
  ANVIL_RETURN_IF_ERROR(Regenerate());
  double start = NowUs();
  int calls = 0;
  while (calls < ctx_.protocol.warmup_calls() ||
         NowUs() - start < ctx_.plan.warmup_ms * 1e3) {
    int rc = Call(impl);
    cudaError_t err = cudaDeviceSynchronize();
    if (std::optional<Failure> f = RunFailed(impl, rc, err)) return f;
    if (++calls > 100000) break;
  }
  return std::optional<Failure>();
}

double ProblemSession::DeviceCall::us() const {
  double us = 0;
  for (const Activity& a : acts) us += a.us();
  return us;
}

absl::StatusOr<ProblemSession::DeviceCall> ProblemSession::TimedDeviceCall(GemmImpl& impl) {
  CuptiMonitor& mon = *ctx_.monitor;
  DeviceCall call;
  ANVIL_RETURN_IF_ERROR(mon.SetActivity(true));
  uint64_t t0 = mon.Now();
  call.rc = Call(impl);
  call.err = cudaDeviceSynchronize();
  uint64_t t1 = mon.Now();
  ANVIL_RETURN_IF_ERROR(mon.SetActivity(false));
  call.acts = mon.Take(t0, t1);
  return call;
}

// Device time: CUPTI's sum over every kernel, memset and copy the call started,
// on fresh inputs each time. One sample per round has its output checked.
absl::StatusOr<std::optional<Failure>> ProblemSession::DeviceSamples(GemmImpl& impl,
                                                                    size_t index, bool check) {
  const int n = ctx_.plan.device_samples;
  const int checked = static_cast<int>(next_seed_ % n);
  for (int i = 0; i < n; ++i) {
    ANVIL_RETURN_IF_ERROR(Regenerate());
    absl::StatusOr<DeviceCall> call = TimedDeviceCall(impl);
    if (!call.ok()) return call.status();
    if (std::optional<Failure> f = RunFailed(impl, call->rc, call->err)) return f;
    const std::vector<Activity>& acts = call->acts;
    for (const Activity& a : acts) AddUnique(kernels_[index], a.name);
    samples_[index].device.push_back(call->us());
    if (!check) continue;
    kernels_per_call_.push_back(static_cast<int>(acts.size()));
    if (std::optional<Failure> f = CheckStreams(acts)) return f;
    if (acts.empty()) return Failure{v1::VERDICT_CHEAT, "no_gpu_work", "a timed call launched no GPU work"};
    if (i == checked) {
      absl::StatusOr<std::optional<Failure>> f = CheckTimedOutput("device-time sample");
      if (!f.ok() || *f) return f;
    }
  }
  return std::optional<Failure>();
}

// Cold (L2 flushed, events), warm (back-to-back batch, events) and call
// (host clock around one call plus a device sync); a screen takes only its
// figure's, if any.
absl::StatusOr<std::optional<Failure>> ProblemSession::HostSamples(GemmImpl& impl, size_t index) {
  Samples& s = samples_[index];
  const MeasurePlan& plan = ctx_.plan;
  for (int i = 0; plan.cold && i < ctx_.protocol.cold_samples(); ++i) {
    ANVIL_RETURN_IF_ERROR(Regenerate());
    ANVIL_RETURN_IF_ERROR(FlushL2(i));
    ANVIL_CUDA(cudaEventRecord(ev0_, stream_));
    int rc = Call(impl);
    ANVIL_CUDA(cudaEventRecord(ev1_, stream_));
    cudaError_t err = cudaDeviceSynchronize();
    if (std::optional<Failure> f = RunFailed(impl, rc, err)) return f;
    float ms = 0;
    ANVIL_CUDA(cudaEventElapsedTime(&ms, ev0_, ev1_));
    s.cold.push_back(ms * 1e3);
  }
  if (plan.warm) {
    ANVIL_RETURN_IF_ERROR(Regenerate());
    const int batch = ctx_.protocol.warm_calls();
    int rc = 0;
    ANVIL_CUDA(cudaEventRecord(ev0_, stream_));
    for (int i = 0; i < batch && rc == 0; ++i) rc = Call(impl);
    ANVIL_CUDA(cudaEventRecord(ev1_, stream_));
    cudaError_t err = cudaDeviceSynchronize();
    if (std::optional<Failure> f = RunFailed(impl, rc, err)) return f;
    float ms = 0;
    ANVIL_CUDA(cudaEventElapsedTime(&ms, ev0_, ev1_));
    s.warm.push_back(ms * 1e3 / batch);
  }
  for (int i = 0; plan.call && i < ctx_.protocol.call_samples(); ++i) {
    ANVIL_RETURN_IF_ERROR(Regenerate());
    double h0 = NowUs();
    int rc2 = Call(impl);
    cudaError_t err2 = cudaDeviceSynchronize();
    s.call.push_back(NowUs() - h0);
    if (std::optional<Failure> f = RunFailed(impl, rc2, err2)) return f;
  }
  return std::optional<Failure>();
}

absl::StatusOr<std::optional<Failure>> ProblemSession::TimeRound(GemmImpl& impl, size_t index,
                                                                bool check) {
  absl::StatusOr<std::optional<Failure>> f = std::optional<Failure>();
  if (index == 0 || ctx_.plan.baseline_device) f = DeviceSamples(impl, index, check);
  if (!f.ok() || *f) return f;
  f = HostSamples(impl, index);
  if (!f.ok() || *f) return f;
  if (check) {
    // C still holds this implementation's last eager output (a screen of a
    // graph figure: its last device-time sample's): check it before the
    // replays (or another implementation) overwrite it.
    f = CheckTimedOutput(ctx_.plan.call ? "last call-time sample" : "last eager sample");
    if (!f.ok() || *f) return f;
  }
  const double t0 = NowUs();
  f = GraphSamples(index, check);  // the replays check their own outputs
  extra_profile_["runner_s.timing.graphs"] += (NowUs() - t0) / 1e6;
  return f;
}

absl::StatusOr<std::optional<Failure>> ProblemSession::TimeAll(v1::Measurement& m) {
  graphs_.clear();
  graphs_.resize(impls_.size());
  const double t0 = NowUs();
  for (auto& impl : impls_) {
    absl::StatusOr<std::optional<Failure>> f = Warmup(*impl);
    if (!f.ok() || *f) return f;
  }
  extra_profile_["runner_s.timing.warmup"] = (NowUs() - t0) / 1e6;
  int threads = CountThreads();
  std::vector<size_t> order(impls_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::mt19937_64 rng(next_seed_);
  for (int r = 0; r < ctx_.plan.rounds; ++r) {
    std::shuffle(order.begin(), order.end(), rng);
    for (size_t i : order) {
      // One set a round: within it, consecutive calls reuse their pointers on
      // regenerated inputs, where an output cached by pointer is caught.
      UseOperandSet(i + static_cast<size_t>(r));
      absl::StatusOr<std::optional<Failure>> f = TimeRound(*impls_[i], i, i == 0);
      if (!f.ok() || *f) return f;
    }
  }
  ReleaseGraphs();  // their memory must not count against the candidate's
  // Every round ran: the baselines' figures are complete, whatever the
  // candidate's later checks find.
  if (ctx_.plan.screen && !screened_ && impls_.size() > 1) CacheBaselines();
  if (CountThreads() > threads) {
    return Failure{v1::VERDICT_CHEAT, "host_thread", "threads were started during timing"};
  }
  const double t1 = NowUs();
  absl::StatusOr<std::optional<Failure>> f = CheckNoSkippedWork(m);
  extra_profile_["runner_s.timing.skipped_work"] = (NowUs() - t1) / 1e6;
  return f;
}

// A batch of back-to-back calls on unchanged inputs, observed by CUPTI: every
// call must do about the GPU work it did on fresh inputs. A kernel that skips
// work when it has seen the inputs before fails here (and its warm figure
// would otherwise flatter it).
absl::StatusOr<std::optional<Failure>> ProblemSession::CheckNoSkippedWork(v1::Measurement& m) {
  CuptiMonitor& mon = *ctx_.monitor;
  ANVIL_RETURN_IF_ERROR(Regenerate());
  const int batch = ctx_.protocol.warm_calls();
  ANVIL_RETURN_IF_ERROR(mon.SetActivity(true));
  uint64_t t0 = mon.Now();
  int rc = 0;
  for (int i = 0; i < batch && rc == 0; ++i) {
    rc = Call(*impls_[0]);
  }
  cudaError_t err = cudaDeviceSynchronize();
  uint64_t t1 = mon.Now();
  ANVIL_RETURN_IF_ERROR(mon.SetActivity(false));
  std::vector<Activity> acts = mon.Take(t0, t1);
  if (std::optional<Failure> f = RunFailed(*impls_[0], rc, err)) return f;
  if (std::optional<Failure> f = CheckStreams(acts)) return f;
  double busy = 0;
  for (const Activity& a : acts) busy += a.us();
  std::vector<double> dev = samples_[0].device;
  std::sort(dev.begin(), dev.end());
  double expected = batch * dev[dev.size() / 2];
  (*m.mutable_profile())["repeat_work_ratio"] = expected > 0 ? busy / expected : 0;
  if (busy < 0.5 * expected) {
    return Failure{v1::VERDICT_CHEAT, "skipped_work",
                   absl::StrCat("repeated calls on unchanged inputs did ", busy / expected,
                                " of the GPU work of calls on fresh inputs")};
  }
  return CheckTimedOutput("repeated call");
}

// Whether the call can be captured into a CUDA graph and replayed correctly.
absl::StatusOr<std::optional<Failure>> ProblemSession::CheckGraphCapture(v1::Measurement& m) {
  ANVIL_RETURN_IF_ERROR(Regenerate());
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  bool ok = cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal) == cudaSuccess;
  int rc = Call(*impls_[0]);
  ok = cudaStreamEndCapture(stream_, &graph) == cudaSuccess && ok && rc == 0 && graph;
  ok = ok && cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess;
  ok = ok && cudaGraphLaunch(exec, stream_) == cudaSuccess;
  cudaError_t err = cudaDeviceSynchronize();
  if (exec) cudaGraphExecDestroy(exec);
  if (graph) cudaGraphDestroy(graph);
  if (err != cudaSuccess) {
    context_lost_ = true;
    return Failure{v1::VERDICT_CRASHED, "cuda_error",
                   absl::StrCat("during graph replay: ", cudaGetErrorName(err))};
  }
  cudaGetLastError();  // capture failures are not sticky; clear them
  if (ok) {
    absl::StatusOr<std::optional<Failure>> f = JudgeOutput(Inputs::kNormal, nullptr, nullptr);
    if (!f.ok()) return f.status();
    ok = !*f;
  }
  m.set_graph_capturable(ok);
  size_t free_now = 0, total = 0;
  ANVIL_CUDA(cudaMemGetInfo(&free_now, &total));
  int64_t kept = free_before_ - static_cast<int64_t>(free_now);
  (*m.mutable_profile())["device_bytes_kept"] = double(kept);
  if (kept > ctx_.protocol.max_extra_device_bytes()) {
    return Failure{v1::VERDICT_CHEAT, "memory_exceeded",
                   absl::StrCat("kept ", kept, " bytes of device memory beyond its workspace")};
  }
  return std::optional<Failure>();
}

}  // namespace anvil::runner
