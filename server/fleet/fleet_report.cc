// Fleet: results. A worker's report is checked against its lease and its
// task before anything is stored: the fields the server can know (the
// problem key, the worker, the GPU that ran it) are the server's, every
// figure must be a number, and a malformed result is refused as evidence
// against its worker instead of failing the job that asked for it.
#include <cmath>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/fleet/fleet.h"
#include "server/fleet/fleet_internal.h"

namespace anvil {
namespace {

constexpr char kDigestPrefix[] = "sha256:";

bool Number(double x) { return std::isfinite(x) && x >= 0; }

bool Numbers(const v1::TimingStats& t) {
  if (!Number(t.median_us()) || !Number(t.min_us()) || !Number(t.p90_us()) || !Number(t.spread())) return false;
  for (double s : t.sample_us()) {
    if (!Number(s)) return false;
  }
  return true;
}

bool Numbers(const v1::Timings& t) {
  for (const v1::TimingStats* s : {&t.device(), &t.cold(), &t.warm(), &t.call(), &t.graph_hot(), &t.graph_cold()}) {
    if (!Numbers(*s)) return false;
  }
  return Number(t.first_call_us());
}

bool SameShape(const v1::Shape& a, const v1::Shape& b) {
  return a.m() == b.m() && a.n() == b.n() && a.k() == b.k();
}

// Why measurement i of a measure result is malformed ("" when it is not).
std::string CheckMeasurement(const v1::Task& task, int i, const v1::Measurement& m) {
  const v1::Problem& want = task.problems(i);
  if (!m.candidate_id().empty() && m.candidate_id() != task.candidate().id()) {
    return absl::StrCat("measurement ", i, " is of candidate ", m.candidate_id(), ", not the task's");
  }
  if (!SameShape(m.problem().shape(), want.shape()) ||
      (m.problem().layout() != v1::LAYOUT_UNSPECIFIED && m.problem().layout() != want.layout())) {
    return absl::StrCat("measurement ", i, " is of another problem than the task's");
  }
  if (m.verdict() == v1::VERDICT_UNSPECIFIED) return absl::StrCat("measurement ", i, " has no verdict");
  if (!Numbers(m.timings()) || !Number(m.rel_err()) || !Number(m.exact_max_abs_err()) ||
      !Number(m.sol_us()) || !Number(m.efficiency()) || !Number(m.seconds())) {
    return absl::StrCat("measurement ", i, " has a figure that is not a number >= 0");
  }
  for (const v1::Baseline& b : m.baselines()) {
    if (!Numbers(b.timings()) || !Number(b.rel_err())) {
      return absl::StrCat("measurement ", i, " has a baseline figure that is not a number >= 0");
    }
  }
  if (m.verdict() == v1::VERDICT_PASSED && m.timings().device().median_us() <= 0 &&
      m.timings().graph_cold().median_us() <= 0 && m.timings().graph_hot().median_us() <= 0) {
    return absl::StrCat("measurement ", i, " passed without a time");
  }
  return "";
}

// Why a result is malformed for its task ("" when it is not).
std::string CheckResult(const v1::Task& task, const v1::ReportResultRequest& r, const std::string& artifact_dir) {
  if (!Number(r.seconds())) return "its wall time is not a number >= 0";
  if (task.kind() == v1::TASK_KIND_BUILD) {
    const v1::Build& b = r.build();
    if (b.candidate_id() != task.candidate().id()) return "the build is of another candidate";
    if (b.verdict() == v1::VERDICT_UNSPECIFIED) return "the build has no verdict";
    if (b.verdict() != v1::VERDICT_PASSED) return "";
    if (!absl::StartsWith(b.artifact(), kDigestPrefix)) return "a passed build names no uploaded artifact";
    const std::string digest = b.artifact().substr(sizeof(kDigestPrefix) - 1);
    if (!fleet_internal::IsHexDigest(digest) || !std::filesystem::exists(absl::StrCat(artifact_dir, "/", digest))) {
      return "a passed build names an artifact the server does not hold";
    }
    return "";
  }
  if (r.measurements_size() != task.problems_size()) {
    return absl::StrCat(r.measurements_size(), " measurements for ", task.problems_size(), " problems");
  }
  for (int i = 0; i < r.measurements_size(); ++i) {
    if (std::string why = CheckMeasurement(task, i, r.measurements(i)); !why.empty()) return why;
  }
  return "";
}

// The result as stored: what the server knows replaces what the worker said
// (the problem key from the task, the worker and GPU from the lease).
v1::ReportResultRequest Normalised(v1::ReportResultRequest r, const v1::Task& task, const TaskRecord& lease) {
  for (int i = 0; i < r.measurements_size(); ++i) {
    v1::Measurement* m = r.mutable_measurements(i);
    m->set_candidate_id(task.candidate().id());
    *m->mutable_problem() = task.problems(i);
    m->set_worker(lease.lease_owner);
    m->set_gpu_uuid(lease.lease_gpu);
  }
  for (v1::LtAlgo& a : *r.mutable_tuned()) {
    if (task.problems_size() > 0) a.set_gpu(task.problems(0).gpu());
  }
  return r;
}

}  // namespace

absl::StatusOr<v1::ReportResultResponse> Fleet::Refuse(const v1::ReportResultRequest& r, const TaskRecord& task,
                                                       const std::string& kind, const std::string& why) {
  v1::ReportResultResponse out;
  out.set_accepted(false);
  absl::StatusOr<bool> released = store_->ReleaseTask(r.task_id(), r.attempt(), r.worker_id());
  if (!released.ok()) return released.status();
  if (!*released) {  // not its live lease: nothing to hold against it
    out.set_reason("the lease had expired or was not this worker's; nothing recorded");
    return out;
  }
  WorkerEvidence e;
  e.worker_id = r.worker_id();
  e.kind = kind;
  e.task_id = r.task_id();
  e.candidate_id = task.candidate_id;
  e.detail = absl::StrCat(kind == "infrastructure" ? "infrastructure error" : "malformed result",
                          " on task ", r.task_id(), ": ", why.substr(0, 300));
  if (absl::StatusOr<WorkerRecord> w = store_->RecordEvidence(e, options_.quarantine_after); !w.ok()) {
    return w.status();
  }
  absl::StatusOr<WorkerRecord> w = store_->RecordWorkerRun(
      r.worker_id(), task.kind, r.seconds(), true,
      absl::StrCat(options_.quarantine_after, " failures of its own leases in a row; the last: ", e.detail),
      options_.quarantine_after);
  if (!w.ok()) return w.status();
  const std::string what = kind == "infrastructure" ? std::string("infrastructure error recorded")
                                                   : absl::StrCat("malformed result refused (", why, ")");
  out.set_reason(absl::StrCat(what, "; task queued again", w->quarantine_reason.empty() ? "" : "; worker quarantined"));
  Notify(Event::kQueued);
  return out;
}

absl::StatusOr<v1::ReportResultResponse> Fleet::Report(const v1::ReportResultRequest& r) {
  absl::StatusOr<TaskRecord> task = store_->GetTask(r.task_id());
  if (!task.ok()) return task.status();
  if (!r.infrastructure_error().empty()) return Refuse(r, *task, "infrastructure", r.infrastructure_error());
  v1::Task payload;
  if (!payload.ParseFromString(task->payload)) {
    return absl::DataLossError(absl::StrCat("task ", task->id, " has an unreadable payload"));
  }
  const bool holder = task->state == "leased" && task->lease_owner == r.worker_id() && task->attempt == r.attempt();
  if (holder) {
    if (std::string why = CheckResult(payload, r, options_.artifact_dir); !why.empty()) {
      return Refuse(r, *task, "malformed_report", why);
    }
  }
  const v1::ReportResultRequest stored = Normalised(r, payload, *task);
  absl::StatusOr<TaskResultOutcome> outcome =
      store_->ReportTaskResult(r.task_id(), r.attempt(), r.worker_id(), stored.SerializeAsString());
  if (!outcome.ok()) return outcome.status();
  v1::ReportResultResponse out;
  out.set_accepted(*outcome != TaskResultOutcome::kRefused);
  if (*outcome == TaskResultOutcome::kRefused) {
    Notify(Event::kQueued);  // an expired lease may have gone back to the queue
    out.set_reason(absl::StrCat("late result refused: the lease of attempt ", r.attempt(),
                                " had expired, the task was leased again or cancelled"));
  }
  if (*outcome == TaskResultOutcome::kAccepted) {
    absl::StatusOr<WorkerRecord> w =
        store_->RecordWorkerRun(r.worker_id(), task->kind, r.seconds(), false, "", options_.quarantine_after);
    if (!w.ok()) return w.status();
  }
  Notify(Event::kResult);
  return out;
}

}  // namespace anvil
