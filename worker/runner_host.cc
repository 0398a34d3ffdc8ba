#include "worker/runner_host.h"

#include <filesystem>

#include <google/protobuf/util/json_util.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "proto/problem.h"
#include "sandbox/sandbox.h"

namespace anvil {
namespace {

std::string Tail(const std::string& s, size_t n) {
  return s.size() <= n ? s : "..." + s.substr(s.size() - n);
}

v1::Measurement FailedMeasurement(const v1::Candidate& c, const v1::Shape& shape,
                                  v1::Layout layout, v1::Verdict verdict, std::string reason,
                                  std::string detail) {
  v1::Measurement m;
  m.set_candidate_id(c.id());
  *m.mutable_problem()->mutable_shape() = shape;
  m.mutable_problem()->set_layout(layout);
  m.mutable_problem()->set_dtype(v1::DTYPE_F16_F32ACC);
  m.set_verdict(verdict);
  m.set_reason(std::move(reason));
  m.set_detail(std::move(detail));
  return m;
}

}  // namespace

void MergeTunedAlgo(std::vector<v1::LtAlgo>& algos, v1::LtAlgo tuned) {
  std::erase_if(algos, [&](const v1::LtAlgo& a) {
    return a.shape().m() == tuned.shape().m() && a.shape().n() == tuned.shape().n() &&
           a.shape().k() == tuned.shape().k() && a.layout() == tuned.layout() &&
           a.cublas_version() == tuned.cublas_version() && a.figure() == tuned.figure();
  });
  algos.push_back(std::move(tuned));
}

struct RunnerHost::Attempt {
  std::vector<v1::Measurement> measurements;
  std::vector<v1::LtAlgo> tuned;
  std::optional<v1::RunnerInfo> info;
  sandbox::Result result;
  double limit_s = 0;        // the limit in force when the runner ended...
  std::string limit_basis;   // ...and what it was
};

// The measurement of the problem a runner was on when it stopped early.
v1::Measurement RunnerHost::StoppedRun(const v1::Candidate& c, const v1::Shape& shape,
                                      const Attempt& a) const {
  const sandbox::Result& r = a.result;
  const v1::Verdict verdict = r.timed_out ? v1::VERDICT_TIMEOUT : v1::VERDICT_CRASHED;
  const std::string reason = r.timed_out      ? "timeout"
                             : r.output_capped ? "output_flood"
                             : r.oom_killed    ? "host_memory_exceeded"
                             : r.exit_code == 2 ? "not_loadable"
                             : r.term_signal   ? "crashed"
                                               : "cuda_error";
  std::string detail = r.Describe();
  if (r.timed_out) absl::StrAppend(&detail, "; the limit: ", a.limit_basis);
  if (r.output_capped) {
    absl::StrAppend(&detail, " (", options_.limits.output_cap_bytes, " bytes; device printf?)");
  }
  absl::StrAppend(&detail, ": ", Tail(r.stderr_text, 600));
  v1::Measurement m = FailedMeasurement(c, shape, c.layout(), verdict, reason, detail);
  m.set_time_limit_s(a.limit_s);
  m.set_time_limit_basis(a.limit_basis);
  m.set_output_cap_bytes(options_.limits.output_cap_bytes);
  return m;
}

std::optional<v1::Ceilings> RunnerHost::ceilings() const {
  absl::MutexLock lock(&mu_);
  return ceilings_;
}

absl::StatusOr<RunnerHost::Attempt> RunnerHost::RunOnce(const v1::RunnerRequest& request,
                                                      const std::function<bool()>& cancelled) {
  std::string json;
  if (!google::protobuf::util::MessageToJsonString(request, &json).ok()) {
    return absl::InternalError("cannot encode the runner request");
  }
  absl::StatusOr<sandbox::ScratchDir> scratch =
      sandbox::ScratchDir::Create(options_.scratch_dir, "anvil-run-");
  if (!scratch.ok()) return scratch.status();
  sandbox::Spec spec;
  spec.argv = {options_.toolchain.runner};
  spec.env = {"HOME=" + scratch->path(), "TMPDIR=" + scratch->path(), "LC_ALL=C"};
  spec.env_passthrough = {"CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH"};
  spec.stdin_data = json;
  spec.work_dir = scratch->path();
  const std::string runner_dir =
      std::filesystem::path(options_.toolchain.runner).parent_path().string();
  spec.binds.push_back({std::filesystem::canonical(runner_dir + "/..").string(), "", false});
  spec.binds.push_back({request.library(), "", false});
  spec.binds.push_back({options_.toolchain.cuda_root, "", false});
  spec.gpu = true;
  const RunnerLimits& limits = options_.limits;
  spec.limits.wall_time = limits.startup_timeout +
                          FixedProblemLimit(limits, request.protocol().profile_counters()) *
                              request.shapes_size();
  spec.limits.memory_max_bytes = options_.memory_max_bytes;
  spec.limits.output_cap_bytes = limits.output_cap_bytes;
  spec.limits.kill_at_output_cap = true;  // a device printf flood ends the run
  spec.isolation = options_.isolation;
  RunnerWatch watch(limits, request.protocol().profile_counters());
  spec.on_stdout = [&watch](absl::string_view chunk) { return watch.OnStdout(chunk); };
  spec.cancelled = cancelled;
  absl::StatusOr<sandbox::Result> run = sandbox::Run(spec);
  if (!run.ok()) return run.status();
  if (run->cancelled) return absl::CancelledError("the measurement was cancelled");
  watch.Finish();
  Attempt a;
  a.result = *run;
  Collect(watch, &a);
  return a;
}

// The runner's events into `a`; each measurement with the limits it ran under.
void RunnerHost::Collect(const RunnerWatch& watch, Attempt* out) {
  Attempt& a = *out;
  const RunnerLimits& limits = options_.limits;
  a.limit_s = watch.current_limit_s();
  a.limit_basis = watch.current_basis();
  size_t measured = 0;
  for (const v1::RunnerEvent& e : watch.events()) {
    if (e.has_measurement()) {
      v1::Measurement m = e.measurement();
      if (measured < watch.applied().size()) {
        const RunnerWatch::Applied& applied = watch.applied()[measured++];
        m.set_time_limit_s(applied.limit_s);
        m.set_time_limit_basis(applied.basis);
        m.set_reference_call_us(applied.reference_call_us);
      }
      m.set_output_cap_bytes(limits.output_cap_bytes);
      a.measurements.push_back(std::move(m));
    }
    if (e.has_lt_algo()) a.tuned.push_back(e.lt_algo());
    if (e.has_info()) a.info = e.info();
    if (e.has_ceilings()) {
      absl::MutexLock lock(&mu_);
      ceilings_ = e.ceilings();
    }
  }
}

absl::StatusOr<RunnerResults> RunnerHost::Measure(const v1::Candidate& candidate,
                                               const v1::Build& build,
                                               const std::vector<v1::Shape>& shapes,
                                               const std::vector<v1::LtAlgo>& known,
                                               const std::function<bool()>& cancelled) {
  RunnerResults out;
  absl::Time start = absl::Now();
  std::vector<v1::LtAlgo> algos = known;
  size_t next = 0;
  while (next < shapes.size()) {
    v1::RunnerRequest req;
    req.set_library(build.artifact());
    req.set_candidate_id(candidate.id());
    req.set_layout(candidate.layout());
    for (size_t i = next; i < shapes.size(); ++i) *req.add_shapes() = shapes[i];
    *req.mutable_protocol() = options_.protocol;
    for (const v1::LtAlgo& a : algos) *req.add_lt_algos() = a;
    if (std::optional<v1::Ceilings> c = ceilings()) *req.mutable_ceilings() = *c;
    req.set_seccomp(options_.seccomp);
    req.set_device(options_.device);
    if (cancelled && cancelled()) return absl::CancelledError("the measurement was cancelled");
    absl::StatusOr<Attempt> a = RunOnce(req, cancelled);
    if (!a.ok()) return a.status();
    ++out.runner_starts;
    if (a->info) out.info = a->info;
    for (v1::LtAlgo& t : a->tuned) {
      MergeTunedAlgo(algos, t);  // a restarted runner must not tune it again
      out.tuned.push_back(std::move(t));
    }
    for (v1::Measurement& m : a->measurements) {
      if (next == shapes.size()) break;
      out.measurements.push_back(std::move(m));
      ++next;
    }
    if (next == shapes.size()) break;
    // The runner stopped before finishing: the problem it was on failed.
    const sandbox::Result& r = a->result;
    if (!a->info && !r.timed_out && !r.output_capped && r.exit_code == 4) {
      return absl::InternalError(absl::StrCat("anvil-runner failed: ", Tail(r.stderr_text, 400)));
    }
    out.measurements.push_back(StoppedRun(candidate, shapes[next], *a));
    const v1::Verdict verdict = out.measurements.back().verdict();
    const std::string reason = out.measurements.back().reason();
    const std::string failed_on = ShapeName(shapes[next++]);
    // A library that cannot load fails everywhere; a kernel that hung or
    // flooded its output once would cost its whole limit again on every later
    // problem: none is run on the rest, and each of those says so.
    if (reason == "not_loadable" || reason == "timeout" || reason == "output_flood") {
      for (; next < shapes.size(); ++next) {
        out.measurements.push_back(FailedMeasurement(
            candidate, shapes[next], candidate.layout(), verdict, reason,
            absl::StrCat("not run: the candidate failed (", reason, ") on ", failed_on,
                         " earlier in this evaluation")));
      }
    }
  }
  for (v1::Measurement& m : out.measurements) m.set_candidate_id(candidate.id());
  out.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  return out;
}

}  // namespace anvil
