// anvil-runner: measures built candidates on problems (RUNNER.md).
// Reads a RunnerRequest (JSON, one line) on stdin and writes RunnerEvents
// (JSON, one per line) on stdout: info, ceilings, then per problem its
// ProblemStart, newly tuned cuBLASLt choices, Measurement and (a screen that
// timed the problem's baselines) its ScreenedBaselines, each as soon as it is
// done; its own stdout then points at stderr, so a candidate's printing
// cannot forge an event, and its stdin at /dev/null, so a candidate cannot
// read the requests. A request is a batch of `items`, (candidate, problem)
// pairs measured in order, each candidate's library opened at its first item
// and kept loaded; a library that cannot be opened is CRASHED not_loadable on
// each of its items, and the rest go on. A request marked keep_alive is
// followed, once its batch is done and the process state checked, by a
// BatchEnd event and the next request line (the same protocol, device and
// seccomp); the end of input ends the process.
// Exit codes:
//   0  done (or the end of input after a keep_alive batch).
//   2  bad request.
//   3  a candidate left the CUDA context unusable (a sticky error): its
//      item's measurement was emitted; the later items were not run.
//   4  the runner itself failed.
//   5  after an item whose next item is another candidate's (or the last of a
//      keep_alive batch),
//      the process-wide state (host threads, current device and context,
//      device limits and configuration, the stream's attributes, device
//      memory in use) differs from the start-up state, which could change
//      the next candidate's verdict or figures. Every item so far was
//      measured and emitted, the last with the verdict it would get alone;
//      the rest of the batch (that candidate's later items too) needs a
//      fresh process. stderr says what changed and after which candidate.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <string>

#include <google/protobuf/util/json_util.h>

#include "absl/strings/str_cat.h"
#include "worker/runner/ceilings.h"
#include "worker/runner/process_state.h"
#include "worker/runner/protocol.h"
#include "worker/runner/session.h"

namespace anvil::runner {
namespace {

using LtAlgos = google::protobuf::RepeatedPtrField<v1::LtAlgo>;

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The runner's events go to its own copy of the stdout it was given; stdout
// itself then points at stderr, so whatever a candidate prints (host printf,
// device printf) can never read as an event of the runner's.
FILE* g_events = nullptr;

absl::Status KeepStdoutForEvents() {
  const int fd = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
  if (fd < 0 || dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
    return absl::InternalError("cannot set stdout aside for the runner's events");
  }
  g_events = fdopen(fd, "w");
  if (g_events == nullptr) return absl::InternalError("cannot open the runner's event stream");
  return absl::OkStatus();
}

void Emit(const v1::RunnerEvent& event) {
  std::string line;
  google::protobuf::util::JsonPrintOptions opts;
  opts.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(event, &line, opts);
  std::fwrite(line.data(), 1, line.size(), g_events);
  std::fputc('\n', g_events);
  std::fflush(g_events);
}

// The requests come on the runner's own copy of the stdin it was given;
// stdin itself then reads /dev/null, so a candidate that reads stdin takes
// nothing meant for the runner.
FILE* g_requests = nullptr;

absl::Status KeepStdinForRequests() {
  const int fd = fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3);
  const int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (fd < 0 || null < 0 || dup2(null, STDIN_FILENO) < 0) {
    return absl::InternalError("cannot set stdin aside for the runner's requests");
  }
  close(null);
  g_requests = fdopen(fd, "r");
  if (g_requests == nullptr) return absl::InternalError("cannot open the runner's request stream");
  return absl::OkStatus();
}

// The next request line, without its newline; nullopt at the end of input.
std::optional<std::string> ReadRequestLine() {
  char* line = nullptr;
  size_t capacity = 0;
  const ssize_t n = getline(&line, &capacity, g_requests);
  std::optional<std::string> out;
  if (n >= 0) out.emplace(line, static_cast<size_t>(n));
  free(line);
  if (out && !out->empty() && out->back() == '\n') out->pop_back();
  return out;
}

int Fail(int code, const std::string& message) {
  std::fprintf(stderr, "anvil-runner: %s\n", message.c_str());
  return code;
}

// `baselines`: those timed in this problem (0 when a screen reuses the
// problem's earlier baselines), so the limit counts only calls still to come.
void EmitProblemStart(const v1::Shape& shape, const RunnerContext& ctx, double reference_us,
                      int baselines) {
  const int64_t calls =
      PlannedCallsPerImplementation(ctx.protocol, ctx.plan, reference_us, shape, ctx.l2_bytes);
  v1::RunnerEvent e;
  v1::ProblemStart* s = e.mutable_problem_start();
  *s->mutable_shape() = shape;
  s->set_reference_call_us(reference_us);
  s->set_candidate_calls(calls);
  s->set_baseline_calls(calls * baselines);
  s->set_warmup_seconds((1 + baselines) * ctx.plan.warmup_ms / 1e3);
  Emit(e);
}

// Fills the empty slots of `out` with the choices in `algos` for this
// problem, by figure (the first that matches).
void FindAlgos(const LtAlgos& algos, const v1::Shape& s, v1::Layout layout,
               const std::string& version, LtCached* out) {
  for (const v1::LtAlgo& a : algos) {
    if (a.shape().m() != s.m() || a.shape().n() != s.n() || a.shape().k() != s.k() ||
        a.layout() != layout || a.cublas_version() != version) {
      continue;
    }
    const std::string& f = a.figure();
    const v1::LtAlgo** slot = f == "graph-hot" ? &out->hot : f == "graph-cold" ? &out->cold
                              : (f.empty() || f == "device") ? &out->device : nullptr;
    if (slot && !*slot) *slot = &a;
  }
}

// What every measurement of this runner says about where it was taken.
void Stamp(v1::Measurement& m, const v1::RunnerItem& item, const Device& device) {
  m.set_candidate_id(item.candidate_id());
  m.mutable_problem()->set_gpu(device.info.gpu());
  m.mutable_problem()->set_arch(device.info.arch());
  m.set_gpu_uuid(device.info.gpu_uuid());
  m.set_versions(device.info.versions());
  m.set_measured_at_unix_ms(std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::system_clock::now().time_since_epoch()).count());
}

// Measures one candidate on one problem and emits its newly tuned cuBLASLt
// choices (also appended to *tuned), then its measurement. 0, or the exit
// code when the runner must stop.
// `outside_s`: the process's seconds since the last item outside any item
// (start-up, the state check between candidates), in the profile as
// "runner_s.process".
int MeasureItem(const v1::RunnerItem& item, const LtCached& algos, RunnerContext& ctx,
                const CandidateLibrary& lib, const Device& device, LtAlgos* tuned,
                double outside_s) {
  auto p0 = std::chrono::steady_clock::now();
  const v1::Shape& shape = item.shape();
  GemmShape gs{int(shape.m()), int(shape.n()), int(shape.k()), item.layout()};
  ctx.on_problem_start = [&](double reference_us, int baselines) {
    EmitProblemStart(shape, ctx, reference_us, baselines);
  };
  ProblemSession session(ctx, lib, gs);
  std::vector<v1::LtAlgo> new_algos;
  absl::StatusOr<v1::Measurement> m = session.Run(algos, &new_algos);
  if (!m.ok()) return Fail(4, absl::StrCat("problem ", shape.m(), "x", shape.n(), "x", shape.k(), ": ", m.status().message()));
  Stamp(*m, item, device);
  m->set_seconds(SecondsSince(p0));
  (*m->mutable_profile())["runner_s.process"] = outside_s;
  for (const v1::LtAlgo& t : new_algos) {
    v1::RunnerEvent e;
    *e.mutable_lt_algo() = t;
    Emit(e);
    if (tuned) *tuned->Add() = t;
  }
  v1::RunnerEvent e;
  *e.mutable_measurement() = *m;
  Emit(e);
  if (session.context_lost()) return Fail(3, "candidate left a sticky CUDA error; stopping");
  return 0;
}

// An item whose library cannot be loaded: its measurement.
void EmitNotLoadable(const v1::RunnerItem& item, const RunnerContext& ctx, const Device& device,
                     const absl::Status& why) {
  v1::Measurement m;
  *m.mutable_problem()->mutable_shape() = item.shape();
  m.mutable_problem()->set_layout(item.layout());
  m.mutable_problem()->set_dtype(v1::DTYPE_F16_F32ACC);
  m.set_fidelity(ctx.plan.screen ? v1::FIDELITY_SCREEN : v1::FIDELITY_FULL);
  m.set_verdict(v1::VERDICT_CRASHED);
  m.set_reason("not_loadable");
  m.set_detail(std::string(why.message()));
  Stamp(m, item, device);
  v1::RunnerEvent e;
  *e.mutable_measurement() = m;
  Emit(e);
}

bool SameCandidate(const v1::RunnerItem& a, const v1::RunnerItem& b) {
  return a.library() == b.library() && a.candidate_id() == b.candidate_id();
}

// The vendor libraries and CUPTI allocate and start what they need at their
// first use: one small cuBLAS GEMM watched by CUPTI and one graph launch now,
// so that what they keep is in the start-up state and not charged to the
// first candidate of a batch.
absl::Status PrimeVendorState(RunnerContext& ctx) {
  constexpr int kN = 64;
  absl::StatusOr<DeviceMemory> a = DeviceMemory::Allocate(kN * kN * sizeof(__half));
  absl::StatusOr<DeviceMemory> c = DeviceMemory::Allocate(kN * kN * sizeof(float));
  if (!a.ok()) return a.status();
  if (!c.ok()) return c.status();
  ANVIL_CUDA(cudaMemsetAsync(a->get(), 0, a->bytes(), ctx.stream));
  ANVIL_RETURN_IF_ERROR(ctx.monitor->SetActivity(true));
  const uint64_t t0 = ctx.monitor->Now();
  ANVIL_RETURN_IF_ERROR(ReferenceGemm(ctx.cublas, GemmShape{kN, kN, kN, v1::LAYOUT_NT},
                                      a->get<__half>(), a->get<__half>(), c->get<float>(),
                                      ctx.stream));
  ANVIL_CUDA(cudaStreamSynchronize(ctx.stream));
  ANVIL_RETURN_IF_ERROR(ctx.monitor->SetActivity(false));
  (void)ctx.monitor->Take(t0, ctx.monitor->Now());
  // The graph is a courtesy: a failed capture is not sticky and fails nothing.
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  cudaError_t err = cudaStreamBeginCapture(ctx.stream, cudaStreamCaptureModeGlobal);
  if (err == cudaSuccess) {
    cudaMemsetAsync(c->get(), 0, c->bytes(), ctx.stream);
    err = cudaStreamEndCapture(ctx.stream, &graph);
  }
  if (err == cudaSuccess) err = cudaGraphInstantiate(&exec, graph, 0);
  if (err == cudaSuccess) err = cudaGraphLaunch(exec, ctx.stream);
  cudaGetLastError();
  ANVIL_CUDA(cudaStreamSynchronize(ctx.stream));
  if (exec) cudaGraphExecDestroy(exec);
  if (graph) cudaGraphDestroy(graph);
  return absl::OkStatus();
}

// What outlives a batch in a process that stays up: the start-up state every
// candidate is compared with, the libraries opened, the cuBLASLt choices
// tuned, and how many items were measured (each item's seed is its own).
struct ProcessLife {
  ProcessState start;
  // Opened at each candidate's first item, after the seccomp filter, and
  // kept for the process's life: the CUDA runtime may still refer to their
  // kernels (CandidateLibrary never unmaps one).
  std::map<std::string, absl::StatusOr<std::unique_ptr<CandidateLibrary>>> libraries;
  // Choices tuned in this process, looked up first: a later item of the
  // problem uses them as they are instead of tuning again.
  LtAlgos tuned;
  uint64_t seed = 0;   // the first request's (or the clock's): every item's seed steps from it
  uint64_t items = 0;
};

// The batch. Candidates share the process (RUNNER.md): between one
// candidate's last item and the next candidate (and after a keep_alive
// batch's last item), the process state must be what it was at start-up,
// else the process ends (exit 5) and the host runs the rest in a fresh one.
// `from`: when the batch's request arrived (or the process started).
int RunBatch(const v1::RunnerRequest& req, RunnerContext& ctx, const Device& device, ProcessLife& life,
             std::chrono::steady_clock::time_point from) {
  auto outside_from = from;  // the time outside items, charged to the next one
  for (int i = 0; i < req.items_size(); ++i) {
    const v1::RunnerItem& item = req.items(i);
    // Inputs of their own for every item: an earlier candidate's freed
    // outputs and references, still readable in device memory, were computed
    // from other inputs (the golden-ratio step is odd, so no two items of a
    // process share a seed).
    ctx.seed = life.seed + 0x9E3779B97F4A7C15ull * ++life.items;
    auto [lib, added] = life.libraries.try_emplace(item.library(), absl::UnknownError(""));
    if (added) lib->second = CandidateLibrary::Open(item.library());
    if (!lib->second.ok()) {
      EmitNotLoadable(item, ctx, device, lib->second.status());
    } else {
      LtCached algos;
      FindAlgos(life.tuned, item.shape(), item.layout(), ctx.cublas_version, &algos);
      FindAlgos(req.lt_algos(), item.shape(), item.layout(), ctx.cublas_version, &algos);
      const double outside_s = SecondsSince(outside_from);
      if (int rc = MeasureItem(item, algos, ctx, **lib->second, device, &life.tuned, outside_s); rc != 0) {
        return rc;
      }
      for (v1::ScreenedBaselines& b : ctx.screened.TakeFresh()) {
        v1::RunnerEvent e;
        *e.mutable_screened() = std::move(b);
        Emit(e);
      }
      outside_from = std::chrono::steady_clock::now();
    }
    const bool last = i + 1 == req.items_size();
    if (last ? !req.keep_alive() : SameCandidate(item, req.items(i + 1))) continue;
    // Persisting L2 lines a candidate set aside would favour or hinder the next.
    if (cudaCtxResetPersistingL2Cache() != cudaSuccess) cudaGetLastError();
    absl::StatusOr<ProcessState> now = CaptureProcessState(ctx.stream);
    const std::string changes = now.ok() ? DescribeChanges(life.start, *now)
                                         : absl::StrCat("cannot read it: ", now.status().message());
    if (!changes.empty()) {
      return Fail(5, absl::StrCat("the process state changed after candidate ", item.candidate_id(),
                                  " (", item.library(), "): ", changes,
                                  "; the rest of the batch needs a fresh process"));
    }
  }
  return 0;
}

// OK, or why the request cannot be measured (exit 2).
absl::Status CheckRequest(const v1::RunnerRequest& req) {
  auto layout_ok = [](v1::Layout l) { return l == v1::LAYOUT_NT || l == v1::LAYOUT_NN; };
  for (const v1::RunnerItem& item : req.items()) {
    if (!layout_ok(item.layout())) return absl::InvalidArgumentError("an item's layout missing");
    if (item.library().empty()) return absl::InvalidArgumentError("an item's library missing");
  }
  if (req.items().empty()) return absl::InvalidArgumentError("no items");
  return CheckProtocol(req.protocol());
}

// A request line, parsed, its protocol's defaults filled in and checked;
// else the exit-2 failure.
absl::StatusOr<v1::RunnerRequest> ParseRequest(const std::string& line) {
  v1::RunnerRequest req;
  if (!google::protobuf::util::JsonStringToMessage(line, &req).ok()) {
    return absl::InvalidArgumentError("stdin is not a RunnerRequest in JSON, one per line");
  }
  FillDefaults(*req.mutable_protocol());
  if (absl::Status st = CheckRequest(req); !st.ok()) return st;
  return req;
}

// A later request of a process that stays up keeps what start-up was made
// for: the protocol, device and seccomp.
bool SameSettings(const v1::RunnerRequest& a, const v1::RunnerRequest& b) {
  std::string pa, pb;
  (void)a.protocol().SerializeToString(&pa);
  (void)b.protocol().SerializeToString(&pb);
  return pa == pb && a.device() == b.device() && a.seccomp() == b.seccomp();
}

// The host's baselines from earlier processes, those fit to stand in here
// and not already timed here.
void TakeScreened(const v1::RunnerRequest& req, RunnerContext& ctx) {
  for (const v1::ScreenedBaselines& b : req.screened()) {
    const v1::Shape& s = b.shape();
    if (ctx.plan.screen && BaselineCache::Usable(b, ctx.protocol, ctx.plan.figure) &&
        ctx.screened.Find(int(s.m()), int(s.n()), int(s.k()), b.layout()) == nullptr) {
      ctx.screened.Put(b, /*fresh=*/false);
    }
  }
}

int Main() {
  auto t0 = std::chrono::steady_clock::now();
  if (absl::Status st = KeepStdoutForEvents(); !st.ok()) return Fail(4, std::string(st.message()));
  if (absl::Status st = KeepStdinForRequests(); !st.ok()) return Fail(4, std::string(st.message()));
  std::optional<std::string> line = ReadRequestLine();
  if (!line) return Fail(2, "no request on stdin");
  absl::StatusOr<v1::RunnerRequest> first = ParseRequest(*line);
  if (!first.ok()) return Fail(2, std::string(first.status().message()));
  v1::RunnerRequest req = *std::move(first);
  absl::StatusOr<std::unique_ptr<CuptiMonitor>> monitor = CuptiMonitor::Start();
  if (!monitor.ok()) return Fail(4, std::string(monitor.status().message()));
  absl::StatusOr<Device> device = OpenDevice(req.device());
  if (!device.ok()) return Fail(4, std::string(device.status().message()));

  RunnerContext ctx;
  if (cudaStreamCreateWithFlags(&ctx.stream, cudaStreamNonBlocking) != cudaSuccess) {
    return Fail(4, "cannot create the runner's stream");
  }
  ctx.cublas = device->cublas;
  ctx.lt = device->lt;
  ctx.monitor = monitor->get();
  ctx.protocol = req.protocol();
  ctx.plan = PlanFor(ctx.protocol);
  TakeScreened(req, ctx);
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

  ProcessLife life;
  life.seed = ctx.seed;
  if (absl::Status st = PrimeVendorState(ctx); !st.ok()) return Fail(4, std::string(st.message()));
  absl::StatusOr<ProcessState> start = CaptureProcessState(ctx.stream);
  if (!start.ok()) return Fail(4, std::string(start.status().message()));
  life.start = *std::move(start);
  for (auto from = t0;;) {
    if (int rc = RunBatch(req, ctx, *device, life, from); rc != 0 || !req.keep_alive()) return rc;
    v1::RunnerEvent end;
    end.mutable_batch_end()->set_items(req.items_size());
    Emit(end);
    line = ReadRequestLine();
    if (!line) return 0;
    from = std::chrono::steady_clock::now();
    absl::StatusOr<v1::RunnerRequest> next = ParseRequest(*line);
    if (!next.ok()) return Fail(2, std::string(next.status().message()));
    if (!SameSettings(req, *next)) {
      return Fail(2, "a later request changed the protocol, device or seccomp of the first");
    }
    req = *std::move(next);
    TakeScreened(req, ctx);
  }
}

}  // namespace
}  // namespace anvil::runner

int main() { return anvil::runner::Main(); }
