// Store: jobs and their per-problem progress.
#include "absl/strings/str_cat.h"
#include "store/codec.h"
#include "store/internal.h"
#include "store/store.h"

namespace anvil {

using store_internal::Db;
using store_internal::Stmt;
using store_internal::Transaction;
using store_internal::WithContext;

namespace store_internal {
namespace {

absl::Status LoadJobProblems(Db& db, v1::Job* job) {
  static const std::string kSql = absl::StrCat(
      "SELECT ", ProblemColumns("p."),
      ", jp.candidates_tried, jp.best_candidate_id, jp.best_us, jp.best_baseline_us, jp.status "
      "FROM job_problems jp JOIN problems p ON p.id = jp.problem_id WHERE jp.job_id = ? "
      "ORDER BY jp.id");
  STORE_ASSIGN_OR_RETURN(Stmt s, db.Prepare(kSql));
  s.BindText(job->id());
  while (true) {
    STORE_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return absl::OkStatus();
    v1::ProblemProgress* p = job->add_problems();
    int c = ReadProblem(s, 0, p->mutable_problem());
    p->set_candidates_tried(static_cast<int32_t>(s.Int(c)));
    p->set_best_candidate_id(s.Text(c + 1));
    p->set_best_us(s.Real(c + 2));
    p->set_best_baseline_us(s.Real(c + 3));
    if (p->best_us() > 0) p->set_speedup(p->best_baseline_us() / p->best_us());
    p->set_status(s.Text(c + 4));
  }
}

absl::StatusOr<std::optional<v1::Job>> LoadJob(Db& db, const std::string& job_id) {
  v1::Job job;
  {
    STORE_ASSIGN_OR_RETURN(
        Stmt s,
        db.Prepare("SELECT id, state, created_at, updated_at, error, wall_seconds, gpu_seconds, "
                   "IFNULL(request_id, '') FROM jobs WHERE id = ?"));
    s.BindText(job_id);
    STORE_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return std::optional<v1::Job>();
    job.set_id(s.Text(0));
    job.set_state(JobStateFromText(s.Text(1)));
    job.set_created_unix_ms(s.Int(2));
    job.set_updated_unix_ms(s.Int(3));
    job.set_error(s.Text(4));
    job.set_wall_seconds(s.Real(5));
    job.set_gpu_seconds(s.Real(6));
    job.set_request_id(s.Text(7));
  }
  STORE_RETURN_IF_ERROR(LoadJobProblems(db, &job));
  return std::optional<v1::Job>(std::move(job));
}

absl::Status NoJob(const std::string& job_id) {
  return absl::NotFoundError(absl::StrCat("no job ", job_id));
}

absl::Status UpsertJobProblem(Db& db, const std::string& job_id, int64_t problem_id,
                              const v1::ProblemProgress& p) {
  STORE_ASSIGN_OR_RETURN(
      Stmt s,
      db.Prepare("INSERT INTO job_problems (job_id, problem_id, candidates_tried, "
                 "best_candidate_id, best_us, best_baseline_us, status) "
                 "VALUES (?, ?, ?, ?, ?, ?, ?) "
                 "ON CONFLICT (job_id, problem_id) DO UPDATE SET "
                 "candidates_tried = excluded.candidates_tried, "
                 "best_candidate_id = excluded.best_candidate_id, "
                 "best_us = excluded.best_us, best_baseline_us = excluded.best_baseline_us, "
                 "status = excluded.status"));
  s.BindText(job_id).BindInt(problem_id).BindInt(p.candidates_tried());
  s.BindTextOrNull(p.best_candidate_id()).BindReal(p.best_us()).BindReal(p.best_baseline_us());
  s.BindText(p.status());
  return s.Run();
}

absl::Status TouchJob(Db& db, const std::string& job_id, int64_t now) {
  STORE_ASSIGN_OR_RETURN(Stmt s, db.Prepare("UPDATE jobs SET updated_at = ? WHERE id = ?"));
  s.BindInt(now).BindText(job_id);
  return s.Run();
}

}  // namespace

absl::StatusOr<bool> JobExists(Db& db, const std::string& job_id) {
  STORE_ASSIGN_OR_RETURN(Stmt s, db.Prepare("SELECT 1 FROM jobs WHERE id = ?"));
  s.BindText(job_id);
  return s.Step();
}

}  // namespace store_internal

absl::Status Store::CreateJob(const std::string& job_id, const v1::OptimizeKernelRequest& request) {
  if (job_id.empty()) return absl::InvalidArgumentError("job id is empty");
  STORE_ASSIGN_OR_RETURN(std::string json, store_internal::MessageJson(request));
  absl::MutexLock lock(&mu_);
  STORE_ASSIGN_OR_RETURN(
      Stmt s, db_->Prepare("INSERT INTO jobs (id, state, request, created_at, updated_at, error) "
                           "VALUES (?, ?, ?, ?, ?, '')"));
  const int64_t now = Now();
  s.BindText(job_id).BindText(store_internal::JobStateText(v1::JOB_STATE_QUEUED)).BindText(json);
  s.BindInt(now).BindInt(now);
  return WithContext(s.Run(), absl::StrCat("creating job ", job_id));
}

absl::StatusOr<std::string> Store::CreateJobForRequest(const std::string& job_id,
                                                       const v1::OptimizeKernelRequest& request,
                                                       const std::string& request_id,
                                                       const std::string& request_sha256) {
  if (job_id.empty() || request_id.empty()) {
    return absl::InvalidArgumentError("job id or request id is empty");
  }
  STORE_ASSIGN_OR_RETURN(std::string json, store_internal::MessageJson(request));
  absl::MutexLock lock(&mu_);
  Transaction txn(*db_);
  STORE_RETURN_IF_ERROR(txn.Begin());
  {
    STORE_ASSIGN_OR_RETURN(
        Stmt s, db_->Prepare("SELECT id, request_sha256 FROM jobs WHERE request_id = ?"));
    s.BindText(request_id);
    STORE_ASSIGN_OR_RETURN(bool row, s.Step());
    if (row && s.Text(1) != request_sha256) {
      return absl::AlreadyExistsError(absl::StrCat("request id ", request_id, " was used for job ",
                                                   s.Text(0), " with another request"));
    }
    if (row) return s.Text(0);  // a replay: the job made the first time
  }
  STORE_ASSIGN_OR_RETURN(
      Stmt s, db_->Prepare("INSERT INTO jobs (id, state, request, created_at, updated_at, error, "
                           "request_id, request_sha256) VALUES (?, ?, ?, ?, ?, '', ?, ?)"));
  const int64_t now = Now();
  s.BindText(job_id).BindText(store_internal::JobStateText(v1::JOB_STATE_QUEUED)).BindText(json);
  s.BindInt(now).BindInt(now).BindText(request_id).BindText(request_sha256);
  STORE_RETURN_IF_ERROR(WithContext(s.Run(), absl::StrCat("creating job ", job_id)));
  STORE_RETURN_IF_ERROR(txn.Commit());
  return job_id;
}

absl::Status Store::AddJobUsage(const std::string& job_id, double wall_seconds,
                                double gpu_seconds) {
  absl::MutexLock lock(&mu_);
  STORE_ASSIGN_OR_RETURN(
      Stmt s, db_->Prepare("UPDATE jobs SET wall_seconds = wall_seconds + ?, "
                           "gpu_seconds = gpu_seconds + ?, updated_at = ? WHERE id = ?"));
  s.BindReal(wall_seconds).BindReal(gpu_seconds).BindInt(Now()).BindText(job_id);
  STORE_RETURN_IF_ERROR(s.Run());
  if (db_->Changes() == 0) return store_internal::NoJob(job_id);
  return absl::OkStatus();
}

absl::Status Store::UpdateJobState(const std::string& job_id, v1::JobState state,
                                   const std::string& error) {
  absl::MutexLock lock(&mu_);
  STORE_ASSIGN_OR_RETURN(
      Stmt s, db_->Prepare("UPDATE jobs SET state = ?, error = ?, updated_at = ? WHERE id = ?"));
  s.BindText(store_internal::JobStateText(state)).BindText(error).BindInt(Now()).BindText(job_id);
  STORE_RETURN_IF_ERROR(s.Run());
  if (db_->Changes() == 0) return store_internal::NoJob(job_id);
  return absl::OkStatus();
}

absl::Status Store::UpdateJobProblem(const std::string& job_id,
                                     const v1::ProblemProgress& progress) {
  absl::MutexLock lock(&mu_);
  Transaction txn(*db_);
  STORE_RETURN_IF_ERROR(txn.Begin());
  STORE_ASSIGN_OR_RETURN(bool found, store_internal::JobExists(*db_, job_id));
  if (!found) return store_internal::NoJob(job_id);
  STORE_ASSIGN_OR_RETURN(int64_t problem_id,
                         store_internal::UpsertProblemRow(*db_, progress.problem()));
  STORE_RETURN_IF_ERROR(
      WithContext(store_internal::UpsertJobProblem(*db_, job_id, problem_id, progress),
                  absl::StrCat("updating job ", job_id)));
  STORE_RETURN_IF_ERROR(store_internal::TouchJob(*db_, job_id, Now()));
  return txn.Commit();
}

absl::StatusOr<v1::Job> Store::GetJob(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  STORE_ASSIGN_OR_RETURN(std::optional<v1::Job> job, store_internal::LoadJob(*db_, job_id));
  if (!job.has_value()) return store_internal::NoJob(job_id);
  return *std::move(job);
}

absl::StatusOr<v1::OptimizeKernelRequest> Store::GetJobRequest(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  STORE_ASSIGN_OR_RETURN(Stmt s, db_->Prepare("SELECT request FROM jobs WHERE id = ?"));
  s.BindText(job_id);
  STORE_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return store_internal::NoJob(job_id);
  v1::OptimizeKernelRequest request;
  STORE_RETURN_IF_ERROR(store_internal::ParseMessageJson(s.Text(0), &request));
  return request;
}

absl::StatusOr<std::vector<v1::Job>> Store::ListJobs(int limit, v1::JobState state) {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> ids;
  {
    STORE_ASSIGN_OR_RETURN(Stmt s, db_->Prepare("SELECT id FROM jobs WHERE ?1 = '' OR state = ?1 "
                                                "ORDER BY created_at DESC, rowid DESC LIMIT ?2"));
    s.BindText(state == v1::JOB_STATE_UNSPECIFIED ? "" : store_internal::JobStateText(state));
    s.BindInt(limit > 0 ? limit : 100);
    while (true) {
      STORE_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      ids.push_back(s.Text(0));
    }
  }
  std::vector<v1::Job> jobs;
  for (const std::string& id : ids) {
    STORE_ASSIGN_OR_RETURN(std::optional<v1::Job> job, store_internal::LoadJob(*db_, id));
    if (job.has_value()) jobs.push_back(*std::move(job));
  }
  return jobs;
}

}  // namespace anvil
