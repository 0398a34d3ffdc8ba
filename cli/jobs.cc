// anvil jobs and anvil cancel: through `anvil serve` (--server), or on the
// store with no server, so that an operator can list and cancel jobs while
// the server is down (a job that keeps a server from resuming, say).
#include <iostream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/cli.h"
#include "store/store.h"
#include "store/writer_lock.h"

namespace anvil::cli {

void PrintJobs(const Globals& g, const v1::ListJobsResponse& jobs) {
  if (g.json) {
    std::cout << ToJson(jobs) << "\n";
    return;
  }
  std::cout << absl::StrFormat("%-34s %-10s %8s %9s %8s  %-18s %s\n", "job", "state", "problems", "wall min",
                               "GPU s", "created (unix ms)", "error");
  for (const v1::Job& j : jobs.jobs()) {
    std::cout << absl::StrFormat("%-34s %-10s %8d %9.1f %8.0f  %-18d %s\n", j.id(), JobStateName(j.state()),
                                 j.problems_size(), j.wall_seconds() / 60, j.gpu_seconds(), j.created_unix_ms(),
                                 j.error());
  }
}

int RunJobs(const Globals& g, const std::string& state, int limit) {
  v1::ListJobsRequest req;
  req.set_limit(limit);
  if (!state.empty()) {
    v1::JobState s;
    if (!v1::JobState_Parse("JOB_STATE_" + absl::AsciiStrToUpper(state), &s)) {
      return Report(absl::InvalidArgumentError("--state: queued, running, succeeded, failed or cancelled"), kUsage);
    }
    req.set_state(s);
  }
  if (!g.server.empty()) return RunJobsRemote(g, req);
  StoreOptions o;
  o.read_only = true;
  o.create_if_missing = false;
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(g.db, o);
  if (!store.ok()) return Report(store.status(), kDatabase);
  absl::StatusOr<std::vector<v1::Job>> jobs = (*store)->ListJobs(limit, req.state());
  if (!jobs.ok()) return Report(jobs.status(), kDatabase);
  v1::ListJobsResponse out;
  for (v1::Job& j : *jobs) *out.add_jobs() = std::move(j);
  PrintJobs(g, out);
  return kOk;
}

int RunCancel(const Globals& g, const std::string& job_id) {
  if (!g.server.empty()) return RunCancelRemote(g, job_id);
  absl::StatusOr<WriterLock> writer = WriterLock::Acquire(g.db, "anvil cancel");
  if (!writer.ok()) {
    return Report(absl::FailedPreconditionError(absl::StrCat(
                      writer.status().message(), "; with a server running on it: anvil --server HOST:PORT cancel ",
                      job_id)),
                  kUsage);
  }
  StoreOptions o;
  o.create_if_missing = false;
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(g.db, o);
  if (!store.ok()) return Report(store.status(), kDatabase);
  absl::StatusOr<v1::Job> job = (*store)->GetJob(job_id);
  if (!job.ok()) return Report(job.status(), kUsage);
  if (job->state() != v1::JOB_STATE_QUEUED && job->state() != v1::JOB_STATE_RUNNING) {
    return Report(absl::FailedPreconditionError(
                      absl::StrCat("job ", job_id, " has ended (", JobStateName(job->state()), ")")),
                  kUsage);
  }
  // As the server cancels: the job and every task of it still queued or
  // leased (its workers drop them at their next heartbeat).
  if (absl::Status st = (*store)->UpdateJobState(job_id, v1::JOB_STATE_CANCELLED, "cancelled with no server running");
      !st.ok()) {
    return Report(st, kDatabase);
  }
  absl::StatusOr<int64_t> tasks = (*store)->CancelTasks(job_id);
  if (!tasks.ok()) return Report(tasks.status(), kDatabase);
  job = (*store)->GetJob(job_id);
  if (!job.ok()) return Report(job.status(), kDatabase);
  if (g.json) {
    std::cout << ToJson(*job) << "\n";
  } else {
    std::cout << job->id() << " " << JobStateName(job->state()) << " (" << *tasks << " fleet tasks cancelled)\n";
  }
  return kOk;
}

}  // namespace anvil::cli
