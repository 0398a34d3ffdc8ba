// Correctness checks and cheat detection of ProblemSession (see session.h).
#include <dirent.h>

#include <chrono>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "worker/runner/session.h"

namespace anvil::runner {
namespace {

// Largest integer value for the large-sums probe: partial sums pass 2048
// (where fp16 stops holding every integer) while every result stays below
// fp16's 65504 and every fp32 partial sum is exact.
int LargeSumsMax(int k) {
  int r = static_cast<int>(std::sqrt(65504.0 / k));
  return std::max(1, std::min(64, r));
}

}  // namespace

int CountThreads() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
    closedir(d);
  }
  return n;
}

double NowUs() {
  using namespace std::chrono;
  return duration<double, std::micro>(steady_clock::now().time_since_epoch()).count();
}

struct ProblemSession::AuditedOutcome {
  int rc = 0;
  cudaError_t launch_err = cudaSuccess, sync_err = cudaSuccess;
  double host_us = 0;
  bool early_return = false;
  int new_threads = 0;
  std::vector<Activity> activities;
  ApiAudit audit;
};

// One candidate call under full observation: CUPTI activity and API audit on,
// its own stream synchronised first, then the output snapshotted before a
// device-wide sync so work still running elsewhere shows as a difference.
// The snapshot is a copy on the same stream, issued after that stream was
// idle: the one copy there after `snap` is the runner's, not the candidate's.
absl::StatusOr<ProblemSession::AuditedOutcome> ProblemSession::AuditedCall() {
  AuditedOutcome o;
  CuptiMonitor& mon = *ctx_.monitor;
  int threads = CountThreads();
  ANVIL_RETURN_IF_ERROR(mon.SetActivity(true));
  ANVIL_RETURN_IF_ERROR(mon.SetAudit(true));
  uint64_t t0 = mon.Now();
  double h0 = NowUs();
  o.rc = Call(*impls_[0]);
  o.launch_err = cudaGetLastError();
  o.sync_err = cudaStreamSynchronize(stream_);
  o.host_us = NowUs() - h0;
  ANVIL_RETURN_IF_ERROR(mon.SetAudit(false));
  const uint64_t snap = mon.Now();
  if (o.sync_err == cudaSuccess) {
    cudaMemcpyAsync(c_snap_.get(), c().data<void>(), c_n_ * 2, cudaMemcpyDeviceToDevice, stream_);
    cudaStreamSynchronize(stream_);
  }
  cudaError_t dev = cudaDeviceSynchronize();
  if (o.sync_err == cudaSuccess) o.sync_err = dev;
  uint64_t t1 = mon.Now();
  o.new_threads = CountThreads() - threads;
  o.audit = mon.TakeAudit();
  bool snapshot_seen = false;
  for (Activity& a : mon.Take(t0, t1)) {
    const bool snapshot = !snapshot_seen && a.kind == Activity::kMemcpy &&
                          a.stream_id == stream_id_ && a.start_ns >= snap;
    snapshot_seen = snapshot_seen || snapshot;
    if (!snapshot) o.activities.push_back(std::move(a));
  }
  ANVIL_RETURN_IF_ERROR(mon.SetActivity(false));
  if (o.sync_err == cudaSuccess) {
    auto* count = counters_.get<unsigned long long>();
    ANVIL_CUDA(cudaMemsetAsync(count, 0, sizeof(*count), stream_));
    ANVIL_CUDA(CountDiffs(c_snap_.get<__half>(), c().data<__half>(), c_n_, count, stream_));
    unsigned long long diffs = 0;
    ANVIL_CUDA(cudaMemcpyAsync(&diffs, count, sizeof(diffs), cudaMemcpyDeviceToHost, stream_));
    ANVIL_CUDA(cudaStreamSynchronize(stream_));
    o.early_return = diffs > 0;
  }
  return o;
}

std::optional<Failure> ProblemSession::CheckStreams(const std::vector<Activity>& acts) const {
  for (const Activity& a : acts) {
    if (a.stream_id != stream_id_) {
      return Failure{v1::VERDICT_CHEAT, "extra_stream",
                     absl::StrCat(a.name, " ran on a stream other than the caller's; all work "
                                          "must be ordered on the stream passed in")};
    }
  }
  return std::nullopt;
}

absl::StatusOr<std::optional<Failure>> ProblemSession::JudgeCall(const AuditedOutcome& o) {
  cudaError_t err = o.launch_err != cudaSuccess ? o.launch_err : o.sync_err;
  if (err != cudaSuccess) {
    context_lost_ = true;
    return Failure{v1::VERDICT_CRASHED, "cuda_error",
                   absl::StrCat(cudaGetErrorName(err), ": ", cudaGetErrorString(err))};
  }
  if (o.rc != 0) {
    return Failure{v1::VERDICT_UNSUPPORTED, "returned_error",
                   absl::StrCat("anvil_gemm returned ", o.rc, " on a valid problem")};
  }
  if (o.audit.foreign_thread_calls > 0 || o.new_threads > 0) {
    return Failure{v1::VERDICT_CHEAT, "host_thread",
                   absl::StrCat(o.audit.foreign_thread_calls, " CUDA calls from other threads, ",
                                o.new_threads, " threads left running")};
  }
  if (std::optional<Failure> f = CheckStreams(o.activities)) return f;
  if (o.early_return) {
    return Failure{v1::VERDICT_CHEAT, "early_return",
                   "C changed after the caller's stream reported completion"};
  }
  if (o.activities.empty()) {
    return Failure{v1::VERDICT_CHEAT, "no_gpu_work", "the call launched no GPU work"};
  }
  return std::optional<Failure>();
}

absl::StatusOr<CompareStats> ProblemSession::CompareWithReference(const __half* c) {
  ANVIL_RETURN_IF_ERROR(ReferenceGemm(ctx_.cublas, shape_, a0_.get<__half>(), b0_.get<__half>(),
                                      ref_.get<float>(), stream_));
  auto* stats = counters_.get<CompareStats>();
  ANVIL_CUDA(cudaMemsetAsync(stats, 0, sizeof(CompareStats), stream_));
  ANVIL_CUDA(Compare(c, ref_.get<float>(), c_n_, stats, stream_));
  CompareStats host{};
  ANVIL_CUDA(cudaMemcpyAsync(&host, stats, sizeof(host), cudaMemcpyDeviceToHost, stream_));
  ANVIL_CUDA(cudaStreamSynchronize(stream_));
  return host;
}

// Guards, inputs, then the values against the fp32 reference.
absl::StatusOr<std::optional<Failure>> ProblemSession::JudgeOutput(Inputs kind, double* rel_err,
                                                                   double* excess_err) {
  auto* count = counters_.get<unsigned long long>() + 64;
  ANVIL_CUDA(cudaMemsetAsync(count, 0, 2 * sizeof(*count), stream_));
  std::vector<const GuardedBuffer*> guarded;  // every operand set's
  for (const Operands& o : sets_) guarded.insert(guarded.end(), {&o.a, &o.b, &o.c});
  for (const GuardedBuffer* g : guarded) {
    for (auto [p, n] : {g->front_guard(), g->back_guard()}) {
      ANVIL_CUDA(CountBytesNot(p, n, kGuardByte, count, stream_));
    }
  }
  ANVIL_CUDA(CountDiffs(a().data<__half>(), a0_.get<__half>(), a_n_, count + 1, stream_));
  ANVIL_CUDA(CountDiffs(b().data<__half>(), b0_.get<__half>(), b_n_, count + 1, stream_));
  unsigned long long host[2] = {0, 0};
  ANVIL_CUDA(cudaMemcpyAsync(host, count, sizeof(host), cudaMemcpyDeviceToHost, stream_));
  ANVIL_CUDA(cudaStreamSynchronize(stream_));
  if (host[0]) {
    return Failure{v1::VERDICT_INCORRECT, "guard_band_violation",
                   absl::StrCat(host[0], " bytes changed outside A, B or C")};
  }
  if (host[1]) {
    return Failure{v1::VERDICT_INCORRECT, "input_modified",
                   absl::StrCat(host[1], " elements of A or B changed")};
  }
  return JudgeValues(c().data<__half>(), kind, rel_err, excess_err);
}

absl::StatusOr<std::optional<Failure>> ProblemSession::JudgeValues(const __half* c, Inputs kind,
                                                                   double* rel_err,
                                                                   double* excess_err) {
  absl::StatusOr<CompareStats> st = CompareWithReference(c);
  if (!st.ok()) return st.status();
  if (st->poison) {
    return Failure{v1::VERDICT_INCORRECT, "unwritten_output",
                   absl::StrCat(st->poison, " of ", c_n_, " elements of C were not written")};
  }
  if (st->nonfinite) {
    return Failure{v1::VERDICT_INCORRECT, "nan_or_inf",
                   absl::StrCat(st->nonfinite, " elements of C are NaN or Inf")};
  }
  double rel = st->sum_sq_ref > 0 ? std::sqrt(st->sum_sq_diff / st->sum_sq_ref) : 0;
  double excess = st->sum_sq_ref > 0 ? std::sqrt(st->sum_sq_excess / st->sum_sq_ref) : 0;
  if (rel_err) *rel_err = rel;
  if (excess_err) *excess_err = excess;
  if (kind == Inputs::kNormal && excess > ExcessThreshold()) {
    return Failure{v1::VERDICT_INCORRECT, "wrong_result",
                   absl::StrCat("error beyond fp16 rounding of the exact result ", excess,
                                " exceeds ", ExcessThreshold(), " (relative error ", rel, ")")};
  }
  if (kind != Inputs::kNormal && st->rounded_mismatch) {
    bool sums = kind == Inputs::kLargeSums;
    return Failure{v1::VERDICT_INCORRECT, sums ? "fp16_accumulation" : "exact_mismatch",
                   absl::StrCat(st->rounded_mismatch, " elements differ from the exact result",
                                sums ? " once partial sums pass 2048 (accumulation below fp32)"
                                     : " on small-integer inputs", "; max |diff| ",
                                st->max_abs_diff)};
  }
  return std::optional<Failure>();
}

absl::StatusOr<std::optional<Failure>> ProblemSession::CheckOnce(Inputs kind, bool first,
                                                                 v1::Measurement& m) {
  if (kind == Inputs::kNormal) {
    ANVIL_RETURN_IF_ERROR(Regenerate());
  } else {
    int max = kind == Inputs::kExact01 ? 1 : LargeSumsMax(shape_.k);
    ANVIL_CUDA(FillIntegers(a().data<__half>(), a_n_, ++next_seed_, max, stream_));
    ANVIL_CUDA(FillIntegers(b().data<__half>(), b_n_, ++next_seed_, max, stream_));
    ANVIL_RETURN_IF_ERROR(PoisonAndGuard());
  }
  absl::StatusOr<AuditedOutcome> o = AuditedCall();
  if (!o.ok()) return o.status();
  ++audited_calls_;
  audit_total_.allocations += o->audit.allocations;
  audit_total_.synchronizations += o->audit.synchronizations;
  audit_total_.stream_creations += o->audit.stream_creations;
  if (first) {
    samples_[0].first = o->host_us;
    for (const Activity& a : o->activities) kernels_[0].push_back(a.name);
    if (!o->activities.empty()) {
      const Activity& main = o->activities.front();
      (*m.mutable_profile())["ctas"] = double(main.ctas);
      (*m.mutable_profile())["threads_per_cta"] = double(main.threads_per_cta);
      (*m.mutable_profile())["registers"] = double(main.registers);
      (*m.mutable_profile())["shared_bytes"] = double(main.shared_bytes);
      (*m.mutable_profile())["cluster_size"] = double(main.cluster);
      (*m.mutable_profile())["waves"] = ctx_.sm_count ? double(main.ctas) / ctx_.sm_count : 0;
    }
  }
  absl::StatusOr<std::optional<Failure>> f = JudgeCall(*o);
  if (!f.ok() || *f) return f;
  double rel = 0, excess = 0;
  f = JudgeOutput(kind, &rel, &excess);
  if (f.ok() && !*f && kind == Inputs::kNormal) {
    m.set_rel_err(std::max(m.rel_err(), rel));
    double& worst = (*m.mutable_profile())["excess_err"];
    worst = std::max(worst, excess);
  }
  return f;
}

double ProblemSession::ExcessThreshold() const { return AccuracyBound(ctx_.protocol, baseline_excess_); }

absl::StatusOr<std::optional<Failure>> ProblemSession::CheckCorrectness(v1::Measurement& m) {
  samples_.assign(impls_.size(), {});
  kernels_.assign(impls_.size(), {});
  ANVIL_RETURN_IF_ERROR(MeasureBaselineErrors());
  (*m.mutable_profile())["baseline_excess_err"] = baseline_excess_;
  for (auto [kind, first] : {std::pair{Inputs::kNormal, true}, {Inputs::kNormal, false},
                             {Inputs::kExact01, false}, {Inputs::kLargeSums, false}}) {
    absl::StatusOr<std::optional<Failure>> f = CheckOnce(kind, first, m);
    if (!f.ok() || *f) return f;
  }
  (*m.mutable_profile())["allocations_per_call"] = double(audit_total_.allocations) / audited_calls_;
  (*m.mutable_profile())["syncs_per_call"] = double(audit_total_.synchronizations) / audited_calls_;
  (*m.mutable_profile())["large_sums_max_input"] = LargeSumsMax(shape_.k);
  return std::optional<Failure>();
}

// The vendors' own errors on fresh normal inputs: reported beside ours, and
// the floor of the accuracy bound (ExcessThreshold).
absl::Status ProblemSession::MeasureBaselineErrors() {
  baseline_rel_err_.assign(impls_.size(), 0);
  for (size_t i = 1; i < impls_.size(); ++i) {
    ANVIL_RETURN_IF_ERROR(Regenerate());
    int rc = Call(*impls_[i]);
    ANVIL_CUDA(cudaStreamSynchronize(stream_));
    if (rc != 0) return absl::InternalError(absl::StrCat(impls_[i]->name(), " failed: ", rc));
    absl::StatusOr<CompareStats> st = CompareWithReference(c().data<__half>());
    if (!st.ok()) return st.status();
    if (st->sum_sq_ref <= 0) continue;
    baseline_rel_err_[i] = std::sqrt(st->sum_sq_diff / st->sum_sq_ref);
    baseline_excess_ = std::max(baseline_excess_, std::sqrt(st->sum_sq_excess / st->sum_sq_ref));
  }
  return absl::OkStatus();
}

// The output of a timed call: inputs were regenerated before it, so only a
// call that really computed them passes.
absl::StatusOr<std::optional<Failure>> ProblemSession::CheckTimedOutput(const char* when) {
  absl::StatusOr<std::optional<Failure>> f = JudgeOutput(Inputs::kNormal, nullptr, nullptr);
  if (!f.ok() || !*f) return f;
  (*f)->reason = "timed_output_mismatch";
  (*f)->detail = absl::StrCat("output of a timed call (", when, ") is wrong: ", (*f)->detail);
  return f;
}

}  // namespace anvil::runner
