// anvil-runner: evaluates one built candidate on one or more problems.
// Reads a RunnerRequest (JSON) on stdin and writes RunnerEvents (JSON, one per
// line) on stdout: info, ceilings, then one Measurement per problem as soon as
// it is done. Exit codes: 0 done; 2 bad request or candidate not loadable;
// 3 the candidate left the CUDA context unusable (later problems not run);
// 4 the runner itself failed.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>

#include <google/protobuf/util/json_util.h>

#include "absl/strings/str_cat.h"
#include "worker/runner/ceilings.h"
#include "worker/runner/session.h"

namespace anvil::runner {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void Emit(const v1::RunnerEvent& event) {
  std::string line;
  google::protobuf::util::JsonPrintOptions opts;
  opts.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(event, &line, opts);
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

int Fail(int code, const std::string& message) {
  std::fprintf(stderr, "anvil-runner: %s\n", message.c_str());
  return code;
}

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
}

// Calls of one implementation a problem makes at most after its ProblemStart:
// warm-up, the eager timing rounds, the graph replays (each replay of a
// sample runs twice, in both regimes, plus one audited replay per regime; a
// hot replay holds about graph_replay_us of calls, a cold one up to
// the cold sets' count rounded up), and the correctness, timed-output and capture checks
// (kCheckCalls). The worker scales the problem's time limit with it: keep it
// an upper bound when the timing protocol changes.
int64_t PlannedCallsPerImplementation(const v1::RunnerProtocol& p, double reference_us,
                                      const v1::Shape& shape, int64_t l2_bytes) {
  constexpr int64_t kCheckCalls = 64;
  const int64_t eager = p.warmup_calls() + int64_t(p.rounds()) * (p.device_samples() + p.cold_samples() +
                                                                  p.warm_calls() + p.call_samples());
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
  const int64_t replays = 2 * (int64_t(p.rounds()) * p.graph_samples() + 1);
  return eager + replays * (hot_calls + cold_calls) + kCheckCalls;
}

void EmitProblemStart(const v1::Shape& shape, const v1::RunnerProtocol& p, double reference_us,
                      int baselines, int64_t l2_bytes) {
  const int64_t calls = PlannedCallsPerImplementation(p, reference_us, shape, l2_bytes);
  v1::RunnerEvent e;
  v1::ProblemStart* s = e.mutable_problem_start();
  *s->mutable_shape() = shape;
  s->set_reference_call_us(reference_us);
  s->set_candidate_calls(calls);
  s->set_baseline_calls(calls * baselines);
  s->set_warmup_seconds((1 + baselines) * p.warmup_ms() / 1e3);
  Emit(e);
}

// The request's cached cuBLASLt choices for this problem, by figure.
LtCached FindAlgos(const v1::RunnerRequest& req, const v1::Shape& s, const std::string& version) {
  LtCached out;
  for (const v1::LtAlgo& a : req.lt_algos()) {
    if (a.shape().m() != s.m() || a.shape().n() != s.n() || a.shape().k() != s.k() ||
        a.layout() != req.layout() || a.cublas_version() != version) {
      continue;
    }
    const std::string& f = a.figure();
    const v1::LtAlgo** slot = f == "graph-hot" ? &out.hot : f == "graph-cold" ? &out.cold
                              : (f.empty() || f == "device") ? &out.device : nullptr;
    if (slot && !*slot) *slot = &a;
  }
  return out;
}

// Measures one problem and emits its newly tuned cuBLASLt choices, then its
// measurement. 0, or the exit code when the runner must stop.
int RunProblem(const v1::RunnerRequest& req, RunnerContext& ctx, CandidateLibrary& lib,
               const Device& device, const v1::Shape& shape) {
  auto p0 = std::chrono::steady_clock::now();
  GemmShape gs{int(shape.m()), int(shape.n()), int(shape.k()), req.layout()};
  ctx.on_problem_start = [&](double reference_us, int baselines) {
    EmitProblemStart(shape, ctx.protocol, reference_us, baselines, ctx.l2_bytes);
  };
  ProblemSession session(ctx, lib, gs);
  std::vector<v1::LtAlgo> tuned;
  absl::StatusOr<v1::Measurement> m =
      session.Run(FindAlgos(req, shape, ctx.cublas_version), &tuned);
  if (!m.ok()) return Fail(4, absl::StrCat("problem ", shape.m(), "x", shape.n(), "x", shape.k(), ": ", m.status().message()));
  m->set_candidate_id(req.candidate_id());
  m->mutable_problem()->set_gpu(device.info.gpu());
  m->mutable_problem()->set_arch(device.info.arch());
  m->set_gpu_uuid(device.info.gpu_uuid());
  m->set_versions(device.info.versions());
  m->set_measured_at_unix_ms(std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::system_clock::now().time_since_epoch()).count());
  m->set_seconds(SecondsSince(p0));
  for (const v1::LtAlgo& t : tuned) {
    v1::RunnerEvent e;
    *e.mutable_lt_algo() = t;
    Emit(e);
  }
  v1::RunnerEvent e;
  *e.mutable_measurement() = *m;
  Emit(e);
  if (session.context_lost()) return Fail(3, "candidate left a sticky CUDA error; stopping");
  return 0;
}

int Main() {
  auto t0 = std::chrono::steady_clock::now();
  std::string input((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  v1::RunnerRequest req;
  if (!google::protobuf::util::JsonStringToMessage(input, &req).ok()) {
    return Fail(2, "stdin is not a RunnerRequest in JSON");
  }
  if (req.layout() != v1::LAYOUT_NT && req.layout() != v1::LAYOUT_NN) return Fail(2, "layout missing");
  FillDefaults(*req.mutable_protocol());
  absl::StatusOr<std::unique_ptr<CuptiMonitor>> monitor = CuptiMonitor::Start();
  if (!monitor.ok()) return Fail(4, std::string(monitor.status().message()));
  absl::StatusOr<Device> device = OpenDevice(req.device());
  if (!device.ok()) return Fail(4, std::string(device.status().message()));
  absl::StatusOr<std::unique_ptr<CandidateLibrary>> lib = CandidateLibrary::Open(req.library());
  if (!lib.ok()) return Fail(2, std::string(lib.status().message()));

  RunnerContext ctx;
  if (cudaStreamCreateWithFlags(&ctx.stream, cudaStreamNonBlocking) != cudaSuccess) {
    return Fail(4, "cannot create the runner's stream");
  }
  ctx.cublas = device->cublas;
  ctx.lt = device->lt;
  ctx.monitor = monitor->get();
  ctx.protocol = req.protocol();
  ctx.gpu = device->info.gpu();
  ctx.cublas_version = device->cublas_version;
  ctx.sm_count = device->info.sm_count();
  ctx.l2_bytes = device->info.l2_bytes();
  ctx.seed = req.seed() ? req.seed() : uint64_t(t0.time_since_epoch().count());
  absl::StatusOr<DeviceMemory> flush = DeviceMemory::Allocate(ctx.protocol.flush_bytes());
  if (!flush.ok()) return Fail(4, std::string(flush.status().message()));
  ctx.flush = std::move(*flush);
  ctx.ceilings = req.ceilings();
  if (ctx.ceilings.flops_per_s() <= 0 || ctx.ceilings.bytes_per_s() <= 0) {
    absl::StatusOr<v1::Ceilings> c = MeasureCeilings(device->cublas, ctx.stream);
    if (!c.ok()) return Fail(4, std::string(c.status().message()));
    ctx.ceilings = *c;
    v1::RunnerEvent e;
    *e.mutable_ceilings() = *c;
    Emit(e);
  }
  // The counter profiler opens the driver's profiling interface for writing
  // when a range starts, which the filter refuses (sandbox/SANDBOX.md): a
  // profiling runner goes without it, and its protections say so.
  if (req.seccomp() && req.protocol().profile_counters()) {
    device->info.add_protections("no seccomp: counter profile");
  } else if (req.seccomp()) {
    absl::Status st = InstallSeccomp();
    if (!st.ok()) return Fail(4, std::string(st.message()));
    device->info.add_protections("seccomp");
  }
  device->info.set_startup_seconds(SecondsSince(t0));
  v1::RunnerEvent info;
  *info.mutable_info() = device->info;
  Emit(info);

  for (const v1::Shape& shape : req.shapes()) {
    if (int rc = RunProblem(req, ctx, **lib, *device, shape); rc != 0) return rc;
  }
  return 0;
}

}  // namespace
}  // namespace anvil::runner

int main() { return anvil::runner::Main(); }
