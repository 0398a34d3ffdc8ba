#include "worker/runner/protocol.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "proto/figures.h"

namespace anvil::runner {

void FillDefaults(v1::RunnerProtocol& p) {
  auto def = [](auto get, auto set, auto value) { if (get() <= 0) set(value); };
  def([&] { return p.warmup_ms(); }, [&](double v) { p.set_warmup_ms(v); }, 20.0);
  def([&] { return p.warmup_calls(); }, [&](int v) { p.set_warmup_calls(v); }, 5);
  def([&] { return p.rounds(); }, [&](int v) { p.set_rounds(v); }, 5);
  def([&] { return p.device_samples(); }, [&](int v) { p.set_device_samples(v); }, 6);
  def([&] { return p.cold_samples(); }, [&](int v) { p.set_cold_samples(v); }, 2);
  def([&] { return p.warm_calls(); }, [&](int v) { p.set_warm_calls(v); }, 20);
  def([&] { return p.call_samples(); }, [&](int v) { p.set_call_samples(v); }, 6);
  // The threshold applies to the error beyond correct rounding:
  // ||C - fp16(ref)|| / ||ref||, ref the fp32-accumulated product. Against ref
  // itself every kernel, cuBLAS included, sits near 2.1e-4 (the fp16 rounding
  // of C), and on tiny outputs a single element can reach 4.9e-4 (half an ulp):
  // a bound there would fail correct kernels by chance. Beyond rounding, fp32
  // accumulation in another order differs from ref only where the rounding
  // flips (well under 1e-4 up to K = 16384), while fp16 accumulation lands at
  // 6e-4 to 2e-3 against ref, 5.6e-4 and up beyond rounding. 3e-4 sits between.
  def([&] { return p.rel_err_threshold(); }, [&](double v) { p.set_rel_err_threshold(v); }, 3e-4);
  def([&] { return p.flush_bytes(); }, [&](int64_t v) { p.set_flush_bytes(v); }, int64_t(256) << 20);
  def([&] { return p.max_extra_device_bytes(); }, [&](int64_t v) { p.set_max_extra_device_bytes(v); }, int64_t(256) << 20);
  def([&] { return p.max_workspace_bytes(); }, [&](int64_t v) { p.set_max_workspace_bytes(v); }, int64_t(4) << 30);
  // Every algorithm the heuristic returns, up to 32: the fastest for a shape
  // is not always among its first few.
  def([&] { return p.lt_auto_algos(); }, [&](int v) { p.set_lt_auto_algos(v); }, 32);
  // Graph replays: 3 per regime, implementation and round, each lasting about
  // a millisecond (at least 4 calls, at most 8192), the cold sets together
  // over twice the L2.
  def([&] { return p.graph_samples(); }, [&](int v) { p.set_graph_samples(v); }, 3);
  def([&] { return p.graph_replay_us(); }, [&](double v) { p.set_graph_replay_us(v); }, 1000.0);
  def([&] { return p.graph_max_calls(); }, [&](int v) { p.set_graph_max_calls(v); }, 8192);
  def([&] { return p.graph_cold_l2_multiple(); }, [&](double v) { p.set_graph_cold_l2_multiple(v); }, 2.0);
  // A kernel's speed can depend on where its operands lie in device memory: on
  // the H200 a 1000^3 kernel's median moved 6% from one operand set to another,
  // the same sets in every process, so one set per process is one draw
  // (bench/results/2026-11-26-operand-placement-h200.md). Four sets, up to 4 GiB of them.
  def([&] { return p.operand_sets(); }, [&](int v) { p.set_operand_sets(v); }, 4);
  def([&] { return p.max_operand_bytes(); }, [&](int64_t v) { p.set_max_operand_bytes(v); }, int64_t(4) << 30);
  // A screen ranks by the job's figure, graph-cold unless it names another,
  // in 3 rounds (9 graph samples of the figure instead of the full's 15):
  // ranking needs a median, not a spread, and a winner is measured again in
  // full before it counts.
  if (p.screen_figure().empty()) p.set_screen_figure(std::string(kDefaultFigure));
  def([&] { return p.screen_rounds(); }, [&](int v) { p.set_screen_rounds(v); }, 3);
  // Long replays vary little: on the H100 a screen's three rounds of a
  // kernel of 1 ms or more (4 calls a replay) took two thirds of its graph
  // time for samples that moved its median by well under 1%; 10 ms of
  // replays (at least graph_samples of them) ranks it.
  def([&] { return p.screen_replay_us(); }, [&](double v) { p.set_screen_replay_us(v); }, 10000.0);
}

absl::Status CheckProtocol(const v1::RunnerProtocol& p) {
  if (p.fidelity() == v1::FIDELITY_SCREEN && !IsFigure(p.screen_figure())) {
    return absl::InvalidArgumentError(absl::StrCat("unknown screen figure \"", p.screen_figure(),
                                                   "\"; one of ", FigureList()));
  }
  return absl::OkStatus();
}

double AccuracyBound(const v1::RunnerProtocol& p, double vendor_excess) {
  return std::max(p.rel_err_threshold(), 1.25 * vendor_excess);
}

MeasurePlan PlanFor(const v1::RunnerProtocol& p) {
  MeasurePlan plan;
  plan.rounds = p.rounds();
  plan.device_samples = p.device_samples();
  plan.warmup_ms = p.warmup_ms();
  if (p.fidelity() != v1::FIDELITY_SCREEN) return plan;
  plan.warmup_ms = std::min(plan.warmup_ms, 5.0);
  const std::string& f = p.screen_figure();
  plan.screen = true;
  plan.figure = f;
  plan.rounds = p.screen_rounds();
  plan.cold = f == "cold";
  plan.warm = f == "warm";
  plan.call = f == "call";
  plan.graph_hot = f == "graph-hot";
  plan.graph_cold = f == "graph-cold";
  plan.baseline_device = f == "device" || plan.graph_hot || plan.graph_cold;
  plan.lt_figure = plan.graph_hot || plan.graph_cold ? f : "device";
  if (f != "device") plan.device_samples = std::min(plan.device_samples, 2);
  return plan;
}

bool ScreenHasEnoughReplays(const v1::RunnerProtocol& p, const MeasurePlan& plan,
                             const std::vector<double>& per_call_us, int calls) {
  if (!plan.screen || static_cast<int>(per_call_us.size()) < std::max(1, p.graph_samples())) {
    return false;
  }
  double replay_us = 0;
  for (double us : per_call_us) replay_us += us * calls;
  return replay_us >= p.screen_replay_us();
}

int64_t PlannedCallsPerImplementation(const v1::RunnerProtocol& p, const MeasurePlan& plan,
                                      double reference_us, const v1::Shape& shape,
                                      int64_t l2_bytes) {
  constexpr int64_t kCheckCalls = 64;
  const int64_t per_round = plan.device_samples + (plan.cold ? p.cold_samples() : 0) +
                            (plan.warm ? p.warm_calls() : 0) + (plan.call ? p.call_samples() : 0);
  const int64_t eager = p.warmup_calls() + int64_t(plan.rounds) * per_round;
  const int64_t hot_calls = std::clamp<int64_t>(
      reference_us > 0 ? int64_t(std::ceil(p.graph_replay_us() / reference_us)) : 4, 4,
      std::max(4, p.graph_max_calls()));
  // The cold sets as the session sizes them (graph_timing.cc), each call once at least.
  const double set_bytes = 2.0 * (double(shape.m()) * shape.k() + double(shape.n()) * shape.k() +
                                  double(shape.m()) * shape.n());
  const int64_t sets = std::clamp<int64_t>(
      int64_t(p.graph_cold_l2_multiple() * double(l2_bytes) / std::max(1.0, set_bytes)) + 1, 2,
      std::max(2, p.graph_max_calls()));
  const int64_t cold_calls = (std::max(hot_calls, sets) + sets - 1) / sets * sets;
  const int64_t replays = 2 * (int64_t(plan.rounds) * p.graph_samples() + 1);
  const int64_t graph_calls = (plan.graph_hot ? hot_calls : 0) + (plan.graph_cold ? cold_calls : 0);
  return eager + replays * graph_calls + kCheckCalls;
}

}  // namespace anvil::runner
