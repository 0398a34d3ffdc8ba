#include "worker/runner_host.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include <google/protobuf/util/json_util.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "proto/figures.h"
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

bool SameShape(const v1::Shape& a, const v1::Shape& b) {
  return a.m() == b.m() && a.n() == b.n() && a.k() == b.k();
}

}  // namespace

std::vector<BatchItem> OrderByProblem(const std::vector<BatchEntry>& entries) {
  std::vector<BatchItem> items;
  std::vector<std::pair<v1::Shape, v1::Layout>> problems;  // in order of first appearance
  for (const BatchEntry& e : entries) {
    for (const v1::Shape& s : e.shapes) {
      const bool seen = std::any_of(problems.begin(), problems.end(), [&](const auto& p) {
        return SameShape(p.first, s) && p.second == e.candidate.layout();
      });
      if (!seen) problems.emplace_back(s, e.candidate.layout());
    }
  }
  for (const auto& [shape, layout] : problems) {
    for (size_t i = 0; i < entries.size(); ++i) {
      if (entries[i].candidate.layout() != layout) continue;
      for (size_t j = 0; j < entries[i].shapes.size(); ++j) {
        if (SameShape(entries[i].shapes[j], shape)) items.push_back({i, j});
      }
    }
  }
  return items;
}

void MergeTunedAlgo(std::vector<v1::LtAlgo>& algos, v1::LtAlgo tuned) {
  std::erase_if(algos, [&](const v1::LtAlgo& a) {
    return a.shape().m() == tuned.shape().m() && a.shape().n() == tuned.shape().n() &&
           a.shape().k() == tuned.shape().k() && a.layout() == tuned.layout() &&
           a.cublas_version() == tuned.cublas_version() && a.figure() == tuned.figure();
  });
  algos.push_back(std::move(tuned));
}

// The measurement of the problem a runner was on when it stopped early.
v1::Measurement RunnerHost::StoppedRun(const v1::Candidate& c, const v1::Shape& shape,
                                      const Attempt& a) const {
  const sandbox::Result& r = a.result;
  const v1::Verdict verdict = r.timed_out ? v1::VERDICT_TIMEOUT : v1::VERDICT_CRASHED;
  const std::string reason = r.timed_out      ? "timeout"
                             : r.output_capped ? "output_flood"
                             : r.oom_killed    ? "host_memory_exceeded"
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

// The item a runner was on when it sent a measurement of another candidate or
// problem: only printed output can do that (a candidate writing to stdout).
v1::Measurement RunnerHost::ForgedRun(const v1::Candidate& c, const v1::Shape& shape) const {
  return FailedMeasurement(c, shape, c.layout(), v1::VERDICT_CHEAT, "forged_output",
                           "the runner's output held a measurement of another candidate or problem; "
                           "the rest of the batch was measured again in a fresh process");
}

std::optional<v1::Ceilings> RunnerHost::ceilings() const {
  absl::MutexLock lock(&mu_);
  return ceilings_;
}

size_t RunnerHost::screened_size() const {
  absl::MutexLock lock(&mu_);
  return screened_.size();
}

// Keeps what runners sent of the baselines they timed, the newest per
// problem and figure. Whether one may stand in for timing them is the
// receiving runner's decision (BaselineCache::Usable: the accuracy bound is
// its protocol's), so a record can never loosen a later check.
void RunnerHost::KeepScreened(std::vector<v1::ScreenedBaselines> got) {
  const absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  for (v1::ScreenedBaselines& b : got) {
    std::erase_if(screened_, [&](const Screened& s) {
      return now - s.at > kScreenedMaxAge ||
             (SameShape(s.baselines.shape(), b.shape()) && s.baselines.layout() == b.layout() &&
              s.baselines.figure() == b.figure());
    });
    screened_.push_back({std::move(b), now});
  }
}

// The kept baselines of the batch's problems in `figure`, into a screen's request.
void RunnerHost::AddScreened(const std::vector<BatchItem>& items, const std::vector<BatchEntry>& entries,
                             const std::string& figure, v1::RunnerRequest& req) const {
  const absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  for (const Screened& s : screened_) {
    if (s.baselines.figure() != figure || now - s.at > kScreenedMaxAge) continue;
    const bool wanted = std::any_of(items.begin(), items.end(), [&](const BatchItem& i) {
      const BatchEntry& e = entries[i.entry];
      return e.candidate.layout() == s.baselines.layout() && SameShape(e.shapes[i.shape], s.baselines.shape());
    });
    if (wanted) *req.add_screened() = s.baselines;
  }
}

// What every runner process of this host is given: the runner, its
// directory, the CUDA toolkit and the GPU, the memory and output limits.
sandbox::Spec RunnerHost::RunnerSpec(const std::string& work_dir) const {
  sandbox::Spec spec;
  spec.argv = {options_.toolchain.runner};
  spec.env = {"HOME=" + work_dir, "TMPDIR=" + work_dir, "LC_ALL=C"};
  spec.env_passthrough = {"CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH"};
  spec.work_dir = work_dir;
  const std::string runner_dir =
      std::filesystem::path(options_.toolchain.runner).parent_path().string();
  spec.binds.push_back({std::filesystem::canonical(runner_dir + "/..").string(), "", false});
  spec.binds.push_back({options_.toolchain.cuda_root, "", false});
  spec.gpu = true;
  spec.limits.memory_max_bytes = options_.memory_max_bytes;
  spec.limits.output_cap_bytes = options_.limits.output_cap_bytes;
  spec.limits.kill_at_output_cap = true;  // a device printf flood ends the run
  spec.isolation = options_.isolation;
  return spec;
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
  sandbox::Spec spec = RunnerSpec(scratch->path());
  spec.stdin_data = json + "\n";
  std::set<std::string> libraries;
  for (const v1::RunnerItem& item : request.items()) {
    if (libraries.insert(item.library()).second) spec.binds.push_back({item.library(), "", false});
  }
  const RunnerLimits& limits = options_.limits;
  spec.limits.wall_time = limits.startup_timeout +
                          FixedProblemLimit(limits, request.protocol().profile_counters()) *
                              request.items_size();
  RunnerWatch watch(limits, request.protocol().profile_counters());
  spec.on_stdout = [&watch](absl::string_view chunk) { return watch.OnStdout(chunk); };
  spec.cancelled = cancelled;
  absl::StatusOr<sandbox::Result> run = sandbox::Run(spec);
  if (!run.ok()) return run.status();
  if (run->cancelled) return absl::CancelledError("the measurement was cancelled");
  NoteEnd(*run);
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
    if (e.has_screened()) a.screened.push_back(e.screened());
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
  absl::StatusOr<std::vector<RunnerResults>> r =
      MeasureBatch({BatchEntry{candidate, build, shapes}}, MeasureSpec(), known, cancelled);
  if (!r.ok()) return r.status();
  return std::move(r->front());
}

// A batch under way: each item's measurement once known, and the entries
// whose later items are not run (the failure that stopped them).
struct RunnerHost::BatchState {
  const std::vector<BatchEntry>& entries;
  std::vector<BatchItem> items;
  std::vector<std::optional<v1::Measurement>> got;
  std::vector<std::optional<v1::Measurement>> stopped;
  double measured_s = 0;  // the items' own seconds

  explicit BatchState(const std::vector<BatchEntry>& e)
      : entries(e), items(OrderByProblem(e)), got(items.size()), stopped(e.size()) {}
  const BatchEntry& Entry(size_t i) const { return entries[items[i].entry]; }
  const v1::Shape& Shape(size_t i) const { return Entry(i).shapes[items[i].shape]; }

  // The items from `next` on still to measure, into `req` (their indices in
  // *sent); those of a stopped entry are answered "not run" instead.
  void Request(size_t next, v1::RunnerRequest& req, std::vector<size_t>* sent) {
    for (size_t i = next; i < items.size(); ++i) {
      if (got[i]) continue;
      const BatchEntry& e = Entry(i);
      if (const std::optional<v1::Measurement>& why = stopped[items[i].entry]) {
        got[i] = FailedMeasurement(
            e.candidate, Shape(i), e.candidate.layout(), why->verdict(), why->reason(),
            absl::StrCat("not run: the candidate failed (", why->reason(), ") on ",
                         ShapeName(why->problem().shape()), " earlier in this evaluation"));
        continue;
      }
      v1::RunnerItem* item = req.add_items();
      item->set_library(e.build.artifact());
      item->set_candidate_id(e.candidate.id());
      item->set_layout(e.candidate.layout());
      *item->mutable_shape() = Shape(i);
      sent->push_back(i);
    }
  }

  // Takes a process's measurements in the order sent: how many answered
  // their items, and whether one named another candidate or problem than
  // its item (only printed output can: a forged line).
  size_t Take(std::vector<v1::Measurement>& measurements, const std::vector<size_t>& sent, bool* forged) {
    size_t k = 0;
    *forged = false;
    for (v1::Measurement& m : measurements) {
      if (k == sent.size()) break;
      if (m.candidate_id() != Entry(sent[k]).candidate.id() || !SameShape(m.problem().shape(), Shape(sent[k]))) {
        *forged = true;
        break;
      }
      measured_s += m.seconds();
      got[sent[k++]] = std::move(m);
    }
    return k;
  }

  // Each entry's measurements in its shapes' order, labelled, and its share
  // of the processes' wall time (by its items' own seconds; equal without).
  void Results(double wall, int starts, v1::Fidelity fidelity, std::vector<RunnerResults>& out) {
    std::vector<double> own(entries.size(), 0);
    for (size_t i = 0; i < items.size(); ++i) own[items[i].entry] += got[i]->seconds();
    for (size_t i = 0; i < entries.size(); ++i) {
      out[i].measurements.resize(entries[i].shapes.size());
      out[i].runner_starts = starts;
      out[i].seconds = measured_s > 0 ? wall * own[i] / measured_s : wall / double(entries.size());
    }
    for (size_t i = 0; i < items.size(); ++i) {
      v1::Measurement& m = *got[i];
      m.set_candidate_id(Entry(i).candidate.id());
      if (m.fidelity() == v1::FIDELITY_UNSPECIFIED) m.set_fidelity(fidelity);
      out[items[i].entry].measurements[items[i].shape] = std::move(m);
    }
  }
};

absl::StatusOr<std::vector<RunnerResults>> RunnerHost::MeasureBatch(
    const std::vector<BatchEntry>& entries, const MeasureSpec& spec,
    const std::vector<v1::LtAlgo>& known, const std::function<bool()>& cancelled) {
  const absl::Time start = absl::Now();
  std::vector<RunnerResults> out(entries.size());
  BatchState batch(entries);
  std::vector<v1::LtAlgo> algos = known;
  v1::RunnerProtocol protocol = options_.protocol;
  if (spec.fidelity != v1::FIDELITY_UNSPECIFIED) {
    protocol.set_fidelity(spec.fidelity);
    protocol.set_screen_figure(spec.figure);
  }
  const std::string figure =
      protocol.screen_figure().empty() ? std::string(kDefaultFigure) : protocol.screen_figure();
  const bool warm = !spec.keep_warm_for.empty() && protocol.fidelity() == v1::FIDELITY_SCREEN;
  int starts = 0;
  for (size_t next = 0; next < batch.items.size();) {
    v1::RunnerRequest req;
    std::vector<size_t> sent;  // indices into items, in the request's order
    batch.Request(next, req, &sent);
    if (sent.empty()) break;
    *req.mutable_protocol() = protocol;
    for (const v1::LtAlgo& a : algos) *req.add_lt_algos() = a;
    if (std::optional<v1::Ceilings> c = ceilings()) *req.mutable_ceilings() = *c;
    req.set_seccomp(options_.seccomp);
    req.set_device(options_.device);
    if (protocol.fidelity() == v1::FIDELITY_SCREEN) AddScreened(batch.items, entries, figure, req);
    if (cancelled && cancelled()) return absl::CancelledError("the measurement was cancelled");
    absl::StatusOr<Attempt> a = warm ? RunWarm(req, spec.keep_warm_for, cancelled) : RunOnce(req, cancelled);
    if (!a.ok()) return a.status();
    if (!a->reused) ++starts;
    if (a->info) {
      for (RunnerResults& r : out) r.info = a->info;
    }
    KeepScreened(std::move(a->screened));
    for (v1::LtAlgo& t : a->tuned) {
      MergeTunedAlgo(algos, t);  // a restarted runner must not tune it again
      out.front().tuned.push_back(std::move(t));
    }
    bool forged = false;
    const size_t k = batch.Take(a->measurements, sent, &forged);
    if (k == sent.size()) break;
    if (warm) EndWarmRunner();  // the rest in a fresh process, whatever stopped it
    // A runner that stayed up and ended before its batch's first measurement
    // failed as a process (something an earlier batch left behind), not as
    // the item's candidate: the batch runs again in a fresh one, once.
    if (a->reused && k == 0 && !a->answered) continue;
    forged = forged || a->answered;  // "done" before every item was answered
    next = sent[k];
    const sandbox::Result& r = a->result;
    // A sticky CUDA error (3) or changed process state (5) after a finished
    // item: the rest of the batch in a fresh process.
    const bool clean_stop = !r.timed_out && !r.output_capped && r.term_signal == 0 &&
                            (r.exit_code == 3 || r.exit_code == 5);
    if (!forged && clean_stop && k > 0) continue;
    // A refused request (2) or the runner's own failure (4) before its info:
    // Anvil failed, not the candidate.
    if (!forged && !a->info && !r.timed_out && !r.output_capped && (r.exit_code == 2 || r.exit_code == 4)) {
      return absl::InternalError(absl::StrCat("anvil-runner failed: ", Tail(r.stderr_text, 400)));
    }
    // The runner stopped before finishing: the item it was on failed. A
    // kernel that hung or flooded its output once would cost its whole limit
    // again on every later problem: none is run on the rest, and each of
    // those says so (a library that cannot load the runner reports itself,
    // on each of its items).
    v1::Measurement failed = forged ? ForgedRun(batch.Entry(next).candidate, batch.Shape(next))
                                    : StoppedRun(batch.Entry(next).candidate, batch.Shape(next), *a);
    const std::string& reason = failed.reason();
    if (reason == "timeout" || reason == "output_flood") {
      batch.stopped[batch.items[next].entry] = failed;
    }
    batch.got[next++] = std::move(failed);
  }
  batch.Results(absl::ToDoubleSeconds(absl::Now() - start), starts,
                protocol.fidelity() == v1::FIDELITY_SCREEN ? v1::FIDELITY_SCREEN : v1::FIDELITY_FULL, out);
  return out;
}

}  // namespace anvil
