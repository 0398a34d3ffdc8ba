#include "worker/runner/session.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "worker/runner/counter_profile.h"
#include "worker/runner/stats.h"

namespace anvil::runner {
namespace {

constexpr size_t kLtWorkspaceBytes = 64ull << 20;  // cuBLASLt baselines' workspace

}  // namespace

ProblemSession::~ProblemSession() {
  impls_.clear();
  if (ev0_) cudaEventDestroy(ev0_);
  if (ev1_) cudaEventDestroy(ev1_);
}

absl::Status ProblemSession::Allocate() {
  a_n_ = size_t(shape_.m) * shape_.k;
  b_n_ = size_t(shape_.n) * shape_.k;
  c_n_ = size_t(shape_.m) * shape_.n;
  auto guarded = [](GuardedBuffer& b, size_t n) -> absl::Status {
    absl::StatusOr<GuardedBuffer> got = GuardedBuffer::Allocate(n * sizeof(__half));
    if (!got.ok()) return got.status();
    b = std::move(*got);
    return absl::OkStatus();
  };
  auto plain = [](DeviceMemory& d, size_t bytes) -> absl::Status {
    absl::StatusOr<DeviceMemory> got = DeviceMemory::Allocate(bytes);
    if (!got.ok()) return got.status();
    d = std::move(*got);
    return absl::OkStatus();
  };
  const int64_t set_bytes = static_cast<int64_t>((a_n_ + b_n_ + c_n_) * sizeof(__half));
  const int64_t sets = std::clamp<int64_t>(ctx_.protocol.max_operand_bytes() / set_bytes, 1,
                                           std::max(1, ctx_.protocol.operand_sets()));
  sets_.resize(static_cast<size_t>(sets));
  for (Operands& o : sets_) {
    ANVIL_RETURN_IF_ERROR(guarded(o.a, a_n_));
    ANVIL_RETURN_IF_ERROR(guarded(o.b, b_n_));
    ANVIL_RETURN_IF_ERROR(guarded(o.c, c_n_));
  }
  ANVIL_RETURN_IF_ERROR(plain(a0_, a_n_ * sizeof(__half)));
  ANVIL_RETURN_IF_ERROR(plain(b0_, b_n_ * sizeof(__half)));
  ANVIL_RETURN_IF_ERROR(plain(c_snap_, c_n_ * sizeof(__half)));
  ANVIL_RETURN_IF_ERROR(plain(ref_, c_n_ * sizeof(float)));
  ANVIL_RETURN_IF_ERROR(plain(lt_ws_, kLtWorkspaceBytes));
  ANVIL_RETURN_IF_ERROR(plain(counters_, 4096));
  stream_ = ctx_.stream;
  ANVIL_CUDA(cudaEventCreate(&ev0_));
  ANVIL_CUDA(cudaEventCreate(&ev1_));
  absl::StatusOr<uint32_t> sid = ctx_.monitor->StreamId(stream_);
  if (!sid.ok()) return sid.status();
  stream_id_ = *sid;
  // Every set's guards hold from the start: each check reads all of them, also
  // those of sets not used yet.
  for (const Operands& o : sets_) ANVIL_RETURN_IF_ERROR(Guard(o));
  ANVIL_RETURN_IF_ERROR(AllocateColdSets());
  ANVIL_CUDA(cudaStreamSynchronize(stream_));
  next_seed_ = ctx_.seed ^ (uint64_t(shape_.m) << 42) ^ (uint64_t(shape_.n) << 21) ^ shape_.k;
  return absl::OkStatus();
}

absl::Status ProblemSession::SetUpBaselines(const LtCached& cached,
                                            std::vector<v1::LtAlgo>* tuned) {
  impls_.push_back(std::make_unique<CublasGemm>(ctx_.cublas, shape_));
  absl::StatusOr<std::unique_ptr<LtGemm>> heur =
      LtGemm::Create(ctx_.lt, shape_, lt_ws_.get(), kLtWorkspaceBytes, "cublaslt_heuristic");
  if (!heur.ok()) return heur.status();
  absl::StatusOr<std::vector<cublasLtMatmulAlgo_t>> first = (*heur)->Heuristics(1);
  if (!first.ok()) return first.status();
  (*heur)->set_algo(first->front());
  absl::StatusOr<std::unique_ptr<LtGemm>> best =
      LtGemm::Create(ctx_.lt, shape_, lt_ws_.get(), kLtWorkspaceBytes, "cublaslt_auto");
  if (!best.ok()) return best.status();
  ANVIL_RETURN_IF_ERROR(TuneLt(**best, cached, tuned));
  lt_auto_ = best->get();
  impls_.push_back(std::move(*heur));
  impls_.push_back(std::move(*best));
  // One call each now, so lazy vendor allocations are not charged to the candidate.
  for (size_t i = 1; i < impls_.size(); ++i) {
    int rc = Call(*impls_[i]);
    if (rc != 0) return absl::InternalError(absl::StrCat(impls_[i]->name(), " failed: ", rc));
  }
  ANVIL_CUDA(cudaStreamSynchronize(stream_));
  return absl::OkStatus();
}

absl::StatusOr<double> ProblemSession::SlowestBaselineCallUs() {
  double slowest = 0;
  for (size_t i = 1; i < impls_.size(); ++i) {
    const double t0 = NowUs();
    const int rc = Call(*impls_[i]);
    ANVIL_CUDA(cudaStreamSynchronize(stream_));
    if (rc != 0) return absl::InternalError(absl::StrCat(impls_[i]->name(), " failed: ", rc));
    slowest = std::max(slowest, NowUs() - t0);
  }
  return slowest;
}

absl::Status ProblemSession::Regenerate() {
  ANVIL_CUDA(FillNormal(a().data<__half>(), a_n_, ++next_seed_ * 0x9E37ull, stream_));
  ANVIL_CUDA(FillNormal(b().data<__half>(), b_n_, ++next_seed_ * 0x9E37ull, stream_));
  return PoisonAndGuard();
}

int ProblemSession::Call(GemmImpl& impl) {
  return impl.Run(a().data<__half>(), b().data<__half>(), c().data<__half>(), stream_);
}

absl::Status ProblemSession::FlushL2(int pattern) {
  ANVIL_CUDA(cudaMemsetAsync(ctx_.flush.get(), pattern & 0xff, ctx_.flush.bytes(), stream_));
  ANVIL_CUDA(cudaStreamSynchronize(stream_));
  return absl::OkStatus();
}

// Every guard byte of operand set `o` set.
absl::Status ProblemSession::Guard(const Operands& o) {
  for (const GuardedBuffer* g : {&o.a, &o.b, &o.c}) {
    auto [front, fb] = g->front_guard();
    auto [back, bb] = g->back_guard();
    ANVIL_CUDA(cudaMemsetAsync(const_cast<char*>(front), kGuardByte, fb, stream_));
    ANVIL_CUDA(cudaMemsetAsync(const_cast<char*>(back), kGuardByte, bb, stream_));
  }
  return absl::OkStatus();
}

absl::Status ProblemSession::PoisonAndGuard() {
  ANVIL_RETURN_IF_ERROR(Guard(sets_[set_]));
  ANVIL_CUDA(FillBits(c().data<__half>(), c_n_, kPoisonBits, stream_));
  ANVIL_CUDA(cudaMemcpyAsync(a0_.get(), a().data<void>(), a_n_ * 2, cudaMemcpyDeviceToDevice, stream_));
  ANVIL_CUDA(cudaMemcpyAsync(b0_.get(), b().data<void>(), b_n_ * 2, cudaMemcpyDeviceToDevice, stream_));
  ANVIL_CUDA(cudaStreamSynchronize(stream_));
  return absl::OkStatus();
}

absl::StatusOr<v1::Measurement> ProblemSession::Run(const LtCached& cached,
                                                    std::vector<v1::LtAlgo>* tuned) {
  v1::Measurement m;
  double phase_from = NowUs();
  // Seconds of each step of the item, as "runner_s.<step>" in the profile:
  // where a measurement's time goes (bench/scripts/throughput.py sums them).
  const auto phase = [&](const char* step) {
    const double now = NowUs();
    extra_profile_[absl::StrCat("runner_s.", step)] += (now - phase_from) / 1e6;
    phase_from = now;
  };
  ANVIL_RETURN_IF_ERROR(Allocate());
  ws_bytes_ = lib_.workspace_fn()(shape_.m, shape_.n, shape_.k);
  m.set_workspace_bytes(static_cast<int64_t>(ws_bytes_));
  auto fail = [&](const Failure& f) {
    m.set_verdict(f.verdict);
    m.set_reason(f.reason);
    m.set_detail(f.detail);
    Fill(m);
    return m;
  };
  if (ws_bytes_ > uint64_t(ctx_.protocol.max_workspace_bytes())) {
    // Declared honestly, so not a cheat: the problem is out of this worker's
    // reach for this candidate.
    return fail({v1::VERDICT_UNSUPPORTED, "workspace_too_large",
                 absl::StrCat("asks for ", ws_bytes_, " bytes of workspace; the limit is ",
                              ctx_.protocol.max_workspace_bytes())});
  }
  absl::StatusOr<DeviceMemory> ws = DeviceMemory::Allocate(ws_bytes_);
  if (!ws.ok()) return ws.status();
  ws_ = std::move(*ws);
  phase("allocate");
  impls_.push_back(std::make_unique<CandidateGemm>(lib_, shape_, ws_.get()));
  if (ctx_.plan.screen) screened_ = ctx_.screened.Find(shape_.m, shape_.n, shape_.k, shape_.layout);
  if (screened_) {
    // The accuracy bound's floor is the vendors' error on this problem, as
    // the first screen measured it.
    baseline_excess_ = screened_->excess_err();
    reference_call_us_ = screened_->reference_call_us();
  } else if (!ctx_.protocol.skip_baselines()) {
    ANVIL_RETURN_IF_ERROR(SetUpBaselines(cached, tuned));
  }
  ANVIL_CUDA(cudaDeviceSynchronize());
  size_t free_b = 0, total = 0;
  ANVIL_CUDA(cudaMemGetInfo(&free_b, &total));
  free_before_ = static_cast<int64_t>(free_b);
  if (!screened_ && (ctx_.on_problem_start || ctx_.plan.screen)) {
    absl::StatusOr<double> reference = SlowestBaselineCallUs();
    if (!reference.ok()) return reference.status();
    reference_call_us_ = *reference;
  }
  if (ctx_.on_problem_start) {
    ctx_.on_problem_start(reference_call_us_, static_cast<int>(impls_.size()) - 1);
  }
  phase("baselines");

  absl::StatusOr<std::optional<Failure>> f = CheckCorrectness(m);
  phase("checks");
  if (!f.ok()) return f.status();
  if (*f) return fail(**f);
  f = TimeAll(m);
  phase("timing");
  if (!f.ok()) return f.status();
  if (*f) return fail(**f);
  f = CheckGraphCapture(m);
  phase("graph_check");
  if (!f.ok()) return f.status();
  if (*f) return fail(**f);
  m.set_verdict(v1::VERDICT_PASSED);
  (*m.mutable_profile())["operand_sets"] = double(sets_.size());
  Fill(m);
  if (ctx_.protocol.profile_counters()) ProfileCounters(m);
  return m;
}

// After all timing (the replays must not touch a figure): counters for one call
// of the candidate and of the fastest baseline by device time, as "hw.<metric>"
// and "hw.baseline.<metric>", with "hw.baseline_index" naming the baseline. A
// profile that cannot be taken leaves profile_error and never changes the verdict.
void ProblemSession::ProfileCounters(v1::Measurement& m) {
  int fastest = -1;
  for (int i = 0; i < m.baselines_size(); ++i) {
    const double us = m.baselines(i).timings().device().median_us();
    if (us > 0 && (fastest < 0 || us < m.baselines(fastest).timings().device().median_us()))
      fastest = i;
  }
  std::vector<std::string> errors;
  auto profile = [&](size_t impl, const std::string& prefix) {
    GemmImpl& g = *impls_[impl];
    // Every pass from a flushed L2, as the cold figure: the DRAM bytes are a
    // cold call's, whatever the pass order.
    int flushes = 0;
    const auto flush = [&] { return FlushL2(++flushes); };
    absl::StatusOr<CounterProfile> p = ProfileCall(ProfileMetrics(), flush, [&]() -> absl::Status {
      const int rc = Call(g);
      ANVIL_CUDA(cudaStreamSynchronize(stream_));
      if (rc != 0) return absl::InternalError(absl::StrCat("returned ", rc));
      return absl::OkStatus();
    });
    if (!p.ok()) {
      errors.push_back(absl::StrCat(g.name(), ": ", p.status().message()));
      return;
    }
    for (const auto& [name, value] : p->values) (*m.mutable_profile())[prefix + name] = value;
    (*m.mutable_profile())[prefix + "passes"] = p->passes;
    if (!p->unsupported.empty() && impl == 0)
      errors.push_back(absl::StrCat("not on this GPU: ", absl::StrJoin(p->unsupported, ", ")));
  };
  profile(0, "hw.");
  if (fastest >= 0 && static_cast<size_t>(fastest) + 1 < impls_.size()) {  // not a screen's cached one
    (*m.mutable_profile())["hw.baseline_index"] = fastest;
    profile(static_cast<size_t>(fastest) + 1, "hw.baseline.");
  }
  m.set_profile_error(absl::StrJoin(errors, "; "));
}

void ProblemSession::Fill(v1::Measurement& m) const {
  m.set_fidelity(ctx_.plan.screen ? v1::FIDELITY_SCREEN : v1::FIDELITY_FULL);
  m.mutable_problem()->mutable_shape()->set_m(shape_.m);
  m.mutable_problem()->mutable_shape()->set_n(shape_.n);
  m.mutable_problem()->mutable_shape()->set_k(shape_.k);
  m.mutable_problem()->set_layout(shape_.layout);
  m.mutable_problem()->set_dtype(v1::DTYPE_F16_F32ACC);
  double flops = 2.0 * shape_.m * double(shape_.n) * shape_.k;
  double bytes = 2.0 * (double(a_n_) + double(b_n_) + double(c_n_));
  const v1::Ceilings& c = ctx_.ceilings;
  if (c.flops_per_s() > 0 && c.bytes_per_s() > 0) {
    m.set_sol_us(std::max(flops / c.flops_per_s(), bytes / c.bytes_per_s()) * 1e6);
  }
  if (!samples_.empty()) FillTimings(0, m.mutable_timings());
  m.set_graph_note(GraphNote());
  if (m.verdict() == v1::VERDICT_PASSED && ctx_.plan.graph_cold && !m.timings().has_graph_cold() &&
      m.graph_note().empty())
    m.set_graph_note("graph figures not measured (protocol.graph_samples is 0)");
  for (const auto& [name, value] : extra_profile_) (*m.mutable_profile())[name] = value;
  if (m.timings().device().median_us() > 0 && m.sol_us() > 0) {
    m.set_efficiency(m.sol_us() / m.timings().device().median_us());
  }
  if (!kernels_.empty()) {
    for (const std::string& k : kernels_[0]) m.add_kernel_names(k);
  }
  for (size_t i = 1; i < impls_.size() && i < samples_.size(); ++i) {
    *m.add_baselines() = BaselineRecord(i);
  }
  if (screened_) {
    for (const v1::Baseline& b : screened_->records()) *m.add_baselines() = b;
    for (const auto& [name, value] : screened_->profile()) (*m.mutable_profile())[name] = value;
  }
  if (!kernels_per_call_.empty()) {
    std::vector<int> k = kernels_per_call_;
    std::sort(k.begin(), k.end());
    m.set_kernels_per_call(k[k.size() / 2]);
  }
}

void ProblemSession::FillTimings(size_t i, v1::Timings* t) const {
  const Samples& s = samples_[i];
  if (!s.device.empty()) *t->mutable_device() = Summarize(s.device);
  if (!s.cold.empty()) *t->mutable_cold() = Summarize(s.cold);
  if (!s.warm.empty()) *t->mutable_warm() = Summarize(s.warm);
  if (!s.call.empty()) *t->mutable_call() = Summarize(s.call);
  t->set_first_call_us(s.first);
  if (!s.graph_hot.empty()) *t->mutable_graph_hot() = Summarize(s.graph_hot);
  if (!s.graph_cold.empty()) *t->mutable_graph_cold() = Summarize(s.graph_cold);
  if (i < graphs_.size() && graphs_[i].hot_calls) t->set_graph_calls_hot(graphs_[i].hot_calls);
  if (i < graphs_.size() && graphs_[i].cold_calls) {
    t->set_graph_calls_cold(graphs_[i].cold_calls);
    t->set_graph_cold_sets(cold_.sets);
  }
}

v1::Baseline ProblemSession::BaselineRecord(size_t i) const {
  v1::Baseline b;
  b.set_name(impls_[i]->name());
  FillTimings(i, b.mutable_timings());
  // A screen's baselines report its figure only: device samples that sized
  // their graph replays are no figure of theirs.
  if (ctx_.plan.screen && ctx_.plan.figure != "device") b.mutable_timings()->clear_device();
  b.set_kernels(absl::StrJoin(kernels_[i], ";"));
  const bool tuned_here = impls_[i].get() == lt_auto_;
  b.set_algo_index(tuned_here ? lt_auto_index_ : -1);
  b.set_algo_index_graph_hot(tuned_here ? lt_regime_index_[0] : -1);
  b.set_algo_index_graph_cold(tuned_here ? lt_regime_index_[1] : -1);
  if (i < baseline_rel_err_.size()) b.set_rel_err(baseline_rel_err_[i]);
  return b;
}

// The baselines' records as this screen's measurement carries them, and what
// the problem's later screens need besides: the reference call for their
// time limit, the vendors' errors for the accuracy bound, the baselines'
// profile entries and graph notes.
void ProblemSession::CacheBaselines() {
  v1::ScreenedBaselines entry;
  entry.mutable_shape()->set_m(shape_.m);
  entry.mutable_shape()->set_n(shape_.n);
  entry.mutable_shape()->set_k(shape_.k);
  entry.set_layout(shape_.layout);
  entry.set_figure(ctx_.plan.figure);
  entry.set_reference_call_us(reference_call_us_);
  entry.set_excess_err(baseline_excess_);
  std::string note;
  for (size_t i = 1; i < impls_.size() && i < samples_.size(); ++i) {
    *entry.add_records() = BaselineRecord(i);
    const std::string suffix = "." + impls_[i]->name();
    for (const auto& [name, value] : extra_profile_) {
      if (absl::EndsWith(name, suffix)) (*entry.mutable_profile())[name] = value;
    }
    if (i < graphs_.size() && !graphs_[i].why_not.empty()) {
      absl::StrAppend(&note, note.empty() ? "" : "; ", graphs_[i].why_not);
    }
  }
  entry.set_graph_note(note);
  ctx_.screened.Put(std::move(entry), /*fresh=*/true);
}

}  // namespace anvil::runner
