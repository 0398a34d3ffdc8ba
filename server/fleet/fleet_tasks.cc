// Fleet: the tasks of jobs: submitted under ids derived from their job and
// content (so a resumed run takes its earlier run's tasks over), awaited
// while a worker able to take them is live, parked and cancelled with
// their job.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "proto/candidate.h"
#include "server/fleet/fleet.h"
#include "server/fleet/fleet_internal.h"

namespace anvil {

using fleet_internal::NowMs;

namespace {

// What makes two submissions the same task: the job, the kind, the GPU
// model, the candidate, the problems, whether it is a re-check, and a
// screen's figure.
std::string ContentKey(const v1::Task& task, const std::string& gpu, const std::string& job_id) {
  std::string content = absl::StrCat(job_id, "|", v1::TaskKind_Name(task.kind()), "|", gpu, "|",
                                     task.candidate().id(), "|", task.recheck() ? "recheck" : "",
                                     task.fidelity() == v1::FIDELITY_SCREEN ? "|screen:" + task.figure() : "");
  for (const v1::Problem& p : task.problems()) {
    absl::StrAppend(&content, "|", p.shape().m(), "x", p.shape().n(), "x", p.shape().k(), ":", p.layout());
  }
  return absl::StrCat(task.kind() == v1::TASK_KIND_BUILD ? "b-" : "m-", Sha256Hex(content).substr(0, 20));
}

}  // namespace

absl::StatusOr<std::string> Fleet::Submit(const v1::Task& task, const std::string& gpu,
                                          const std::string& job_id,
                                          const std::vector<std::string>& avoid_gpus) {
  const bool build = task.kind() == v1::TASK_KIND_BUILD;
  TaskRecord t;
  t.id = ContentKey(task, build ? "" : gpu, job_id);
  t.kind = build ? "build" : "measure";
  t.job_id = job_id;
  t.candidate_id = task.candidate().id();
  t.gpu = gpu;
  t.payload = task.SerializeAsString();
  t.avoid_gpus = absl::StrJoin(avoid_gpus, ",");
  absl::MutexLock lock(&submit_mu_);
  if (task.recheck()) {
    // Each re-check is a fresh measurement: take over only one whose result
    // nobody collected (an earlier run's, cut off), else a new one.
    const std::string base = t.id;
    int ordinal = recheck_ordinal_[base];
    for (;; ++ordinal) {
      t.id = absl::StrCat(base, "-", ordinal);
      absl::StatusOr<TaskRecord> stored = store_->GetTask(t.id);
      if (!stored.ok() && !absl::IsNotFound(stored.status())) return stored.status();
      if (!stored.ok() || !stored->collected) break;
    }
    recheck_ordinal_[base] = ordinal + 1;
  }
  if (absl::Status st = store_->EnqueueTask(t); !st.ok()) return st;
  Notify(Event::kQueued);
  return t.id;
}

int64_t Fleet::AbleUntilMs(const std::string& kind, const std::string& gpu) {
  int64_t until = 0;
  for (const WorkerRecord& w : Workers()) {
    if (!w.quarantine_reason.empty()) continue;
    const bool able = kind == "build" || std::any_of(w.gpus.begin(), w.gpus.end(), [&gpu](const v1::GpuInfo& g) {
                        return g.model() == gpu;
                      });
    if (able) until = std::max(until, w.last_heartbeat_unix_ms + LeaseMs());
  }
  return until;
}

absl::StatusOr<v1::ReportResultRequest> Fleet::Await(const std::string& task_id, absl::Time deadline,
                                                     const WorkContext& context) {
  const int64_t waiting_since = NowMs();
  const int64_t patience_ms = static_cast<int64_t>(options_.worker_wait_seconds * 1000);
  while (true) {
    const uint64_t seen = Count(Event::kResult);
    absl::StatusOr<TaskRecord> t = store_->GetTask(task_id);
    if (!t.ok()) return t.status();
    if (t->state == "done") {
      v1::ReportResultRequest r;
      if (!r.ParseFromString(t->result)) {
        return absl::DataLossError(absl::StrCat("task ", task_id, " has an unreadable result"));
      }
      if (absl::Status st = store_->MarkTaskCollected(task_id); !st.ok()) return st;
      return r;
    }
    if (t->state == "cancelled") return absl::CancelledError(absl::StrCat("task ", task_id, " was cancelled"));
    if (context.Cancelled() || shutdown_) {
      return absl::CancelledError(absl::StrCat("stopped waiting for task ", task_id, ": its job stopped"));
    }
    if (t->state == "queued") {
      // Nobody able to take it since the last such worker fell silent (or
      // since the wait began): past the patience, the task is abandoned.
      const int64_t now = NowMs();
      const int64_t since = std::max(AbleUntilMs(t->kind, t->gpu), waiting_since);
      if (now > since && now - since > patience_ms) {
        return absl::UnavailableError(absl::StrCat(
            "no live ", t->kind == "build" ? "worker" : absl::StrCat("GPU worker of model ", t->gpu),
            " could take task ", task_id, " for ", options_.worker_wait_seconds,
            " s (fleet.worker_wait_seconds); start one, then run the job again"));
      }
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat("no result for task ", task_id, " in time"));
    }
    WaitFor(Event::kResult, seen, std::min(deadline, absl::Now() + absl::Milliseconds(250)));
  }
}

absl::Status Fleet::ParkJob(const std::string& job_id) {
  if (job_id.empty()) return absl::OkStatus();
  return store_->ParkTasks(job_id).status();
}

absl::Status Fleet::CancelJob(const std::string& job_id) {
  if (job_id.empty()) return absl::OkStatus();
  absl::StatusOr<int64_t> cancelled = store_->CancelTasks(job_id);
  Notify(Event::kResult);  // its Awaits answer now
  return cancelled.status();
}

}  // namespace anvil
