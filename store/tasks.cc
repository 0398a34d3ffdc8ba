// Store: the fleet's task queue and its leases. Schema: SCHEMA.md, "Tasks".
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "store/internal.h"
#include "store/store.h"

namespace anvil {

using store_internal::Db;
using store_internal::Stmt;
using store_internal::Transaction;
using store_internal::WithContext;

namespace {

constexpr char kTaskColumns[] =
    "id, kind, coalesce(job_id, ''), candidate_id, gpu, payload, state, attempt, expired_leases, "
    "coalesce(lease_owner, ''), coalesce(lease_slot, -1), coalesce(lease_expires_at, 0), "
    "coalesce(result, ''), coalesce(result_attempt, 0), coalesce(result_worker, ''), "
    "created_at, updated_at, parked, collected, avoid_gpus, coalesce(lease_gpu, '')";

// A measure task the slot may take: not parked, and not one that avoids this
// GPU while another GPU of the model is live. Binds: others_alive, gpu_uuid.
constexpr char kTakeable[] =
    "parked = 0 AND (? = 0 OR avoid_gpus = '' OR "
    "instr(',' || avoid_gpus || ',', ',' || ? || ',') = 0)";

TaskRecord ReadTask(const Stmt& s) {
  TaskRecord t;
  t.id = s.Text(0);
  t.kind = s.Text(1);
  t.job_id = s.Text(2);
  t.candidate_id = s.Text(3);
  t.gpu = s.Text(4);
  t.payload = s.Blob(5);
  t.state = s.Text(6);
  t.attempt = static_cast<int32_t>(s.Int(7));
  t.expired_leases = static_cast<int32_t>(s.Int(8));
  t.lease_owner = s.Text(9);
  t.lease_slot = static_cast<int32_t>(s.Int(10));
  t.lease_expires_unix_ms = s.Int(11);
  t.result = s.Blob(12);
  t.result_attempt = static_cast<int32_t>(s.Int(13));
  t.result_worker = s.Text(14);
  t.created_unix_ms = s.Int(15);
  t.updated_unix_ms = s.Int(16);
  t.parked = s.Int(17) != 0;
  t.collected = s.Int(18) != 0;
  t.avoid_gpus = s.Text(19);
  t.lease_gpu = s.Text(20);
  return t;
}

absl::StatusOr<std::optional<TaskRecord>> LoadTask(Db& db, const std::string& id) {
  STORE_ASSIGN_OR_RETURN(Stmt s,
                         db.Prepare(absl::StrCat("SELECT ", kTaskColumns, " FROM tasks WHERE id = ?")));
  s.BindText(id);
  STORE_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return std::nullopt;
  return ReadTask(s);
}

// Returns every lease that ran out before `now` to the queue.
absl::StatusOr<int64_t> RequeueExpired(Db& db, int64_t now) {
  STORE_ASSIGN_OR_RETURN(
      Stmt s, db.Prepare("UPDATE tasks SET state = 'queued', expired_leases = expired_leases + 1, "
                         "lease_owner = NULL, lease_slot = NULL, lease_expires_at = NULL, lease_gpu = NULL, "
                         "updated_at = ? WHERE state = 'leased' AND lease_expires_at < ?"));
  s.BindInt(now).BindInt(now);
  STORE_RETURN_IF_ERROR(WithContext(s.Run(), "returning expired leases to the queue"));
  return db.Changes();
}

// The oldest queued task of a kind (and GPU model, for measure tasks) the
// request may take.
absl::StatusOr<std::optional<std::string>> OldestQueued(Db& db, const std::string& kind,
                                                        const TaskLeaseRequest& r) {
  STORE_ASSIGN_OR_RETURN(
      Stmt s, db.Prepare(absl::StrCat("SELECT id FROM tasks WHERE state = 'queued' AND kind = ? AND gpu = ? "
                                      "AND ", kTakeable, " ORDER BY created_at, id LIMIT 1")));
  s.BindText(kind).BindText(kind == "build" ? "" : r.gpu);
  s.BindInt(kind == "measure" && r.others_alive ? 1 : 0).BindText(r.gpu_uuid);
  STORE_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return std::nullopt;
  return s.Text(0);
}

// Whether a lease could find work: a queued task the request can take, or
// an expired lease to return to the queue.
absl::StatusOr<bool> AnythingToLease(Db& db, const TaskLeaseRequest& r, int64_t now) {
  STORE_ASSIGN_OR_RETURN(
      Stmt s, db.Prepare(absl::StrCat(
                  "SELECT EXISTS (SELECT 1 FROM tasks WHERE state = 'queued' AND ", kTakeable, " AND "
                  "((kind = 'measure' AND gpu = ? AND ? != '') OR (kind = 'build' AND ?))) "
                  "OR EXISTS (SELECT 1 FROM tasks WHERE state = 'leased' AND lease_expires_at < ?)")));
  s.BindInt(r.others_alive ? 1 : 0).BindText(r.gpu_uuid);
  s.BindText(r.gpu).BindText(r.gpu).BindInt(r.take_builds ? 1 : 0).BindInt(now);
  STORE_ASSIGN_OR_RETURN(bool row, s.Step());
  return row && s.Int(0) != 0;
}

}  // namespace

absl::Status Store::EnqueueTask(const TaskRecord& t) {
  if (t.id.empty() || t.candidate_id.empty() || t.payload.empty()) {
    return absl::InvalidArgumentError("a task needs an id, a candidate id and a payload");
  }
  if (t.kind != "build" && t.kind != "measure") {
    return absl::InvalidArgumentError(absl::StrCat("task kind '", t.kind, "' is not build or measure"));
  }
  if (t.kind == "measure" && t.gpu.empty()) {
    return absl::InvalidArgumentError("a measure task needs the GPU model it runs on");
  }
  absl::MutexLock lock(&mu_);
  STORE_ASSIGN_OR_RETURN(
      Stmt s, db_->Prepare("INSERT INTO tasks (id, kind, job_id, candidate_id, gpu, payload, state, "
                           "created_at, updated_at, avoid_gpus) VALUES (?, ?, ?, ?, ?, ?, 'queued', ?, ?, ?) "
                           "ON CONFLICT (id) DO UPDATE SET parked = 0"));
  const int64_t now = Now();
  s.BindText(t.id).BindText(t.kind).BindTextOrNull(t.job_id).BindText(t.candidate_id);
  s.BindText(t.kind == "build" ? "" : t.gpu).BindBlob(t.payload).BindInt(now).BindInt(now);
  s.BindText(t.avoid_gpus);
  return WithContext(s.Run(), absl::StrCat("queueing task ", t.id));
}

absl::StatusOr<std::optional<TaskRecord>> Store::LeaseTask(const TaskLeaseRequest& r) {
  if (r.worker_id.empty() || r.lease_ms <= 0) {
    return absl::InvalidArgumentError("a lease needs a worker id and a positive lease time");
  }
  absl::MutexLock lock(&mu_);
  const int64_t now = Now();
  // Idle workers poll often: answer "nothing" with a read, not a write transaction.
  STORE_ASSIGN_OR_RETURN(bool any, AnythingToLease(*db_, r, now));
  if (!any) return std::nullopt;
  Transaction txn(*db_);
  STORE_RETURN_IF_ERROR(txn.Begin());
  STORE_RETURN_IF_ERROR(RequeueExpired(*db_, now).status());
  std::optional<std::string> id;
  if (!r.gpu.empty()) {
    STORE_ASSIGN_OR_RETURN(id, OldestQueued(*db_, "measure", r));
  }
  if (!id.has_value() && r.take_builds) {
    STORE_ASSIGN_OR_RETURN(id, OldestQueued(*db_, "build", r));
  }
  if (!id.has_value()) {
    STORE_RETURN_IF_ERROR(txn.Commit());
    return std::nullopt;
  }
  {
    STORE_ASSIGN_OR_RETURN(
        Stmt s, db_->Prepare("UPDATE tasks SET state = 'leased', attempt = attempt + 1, "
                             "lease_owner = ?, lease_slot = ?, lease_expires_at = ?, lease_gpu = ?, "
                             "updated_at = ? WHERE id = ?"));
    s.BindText(r.worker_id).BindInt(r.slot).BindInt(now + r.lease_ms).BindTextOrNull(r.gpu_uuid);
    s.BindInt(now).BindText(*id);
    STORE_RETURN_IF_ERROR(WithContext(s.Run(), absl::StrCat("leasing task ", *id)));
  }
  STORE_ASSIGN_OR_RETURN(std::optional<TaskRecord> task, LoadTask(*db_, *id));
  STORE_RETURN_IF_ERROR(txn.Commit());
  return task;
}

absl::StatusOr<std::vector<std::string>> Store::RenewLeases(const std::string& worker_id,
                                                            const std::vector<std::string>& ids,
                                                            int64_t lease_ms) {
  absl::MutexLock lock(&mu_);
  Transaction txn(*db_);
  STORE_RETURN_IF_ERROR(txn.Begin());
  const int64_t now = Now();
  {
    STORE_ASSIGN_OR_RETURN(Stmt s,
                           db_->Prepare("UPDATE workers SET last_heartbeat_at = ? WHERE id = ?"));
    s.BindInt(now).BindText(worker_id);
    STORE_RETURN_IF_ERROR(s.Run());
    if (db_->Changes() == 0) return absl::NotFoundError(absl::StrCat("no worker ", worker_id));
  }
  std::vector<std::string> lost;
  for (const std::string& id : ids) {
    STORE_ASSIGN_OR_RETURN(
        Stmt s, db_->Prepare("UPDATE tasks SET lease_expires_at = ?, updated_at = ? WHERE id = ? "
                             "AND state = 'leased' AND lease_owner = ? AND lease_expires_at >= ?"));
    s.BindInt(now + lease_ms).BindInt(now).BindText(id).BindText(worker_id).BindInt(now);
    STORE_RETURN_IF_ERROR(s.Run());
    if (db_->Changes() == 0) lost.push_back(id);
  }
  STORE_RETURN_IF_ERROR(txn.Commit());
  return lost;
}

absl::StatusOr<TaskResultOutcome> Store::ReportTaskResult(const std::string& task_id,
                                                          int32_t attempt,
                                                          const std::string& worker_id,
                                                          const std::string& result) {
  absl::MutexLock lock(&mu_);
  Transaction txn(*db_);
  STORE_RETURN_IF_ERROR(txn.Begin());
  const int64_t now = Now();
  STORE_ASSIGN_OR_RETURN(std::optional<TaskRecord> t, LoadTask(*db_, task_id));
  if (!t.has_value()) return absl::NotFoundError(absl::StrCat("no task ", task_id));
  if (t->state == "done") {
    STORE_RETURN_IF_ERROR(txn.Commit());
    const bool same = t->result_attempt == attempt && t->result_worker == worker_id;
    return same ? TaskResultOutcome::kAlreadyAccepted : TaskResultOutcome::kRefused;
  }
  const bool holder = t->state == "leased" && t->attempt == attempt && t->lease_owner == worker_id;
  if (!holder || t->lease_expires_unix_ms < now) {
    STORE_RETURN_IF_ERROR(RequeueExpired(*db_, now).status());
    STORE_RETURN_IF_ERROR(txn.Commit());
    return TaskResultOutcome::kRefused;
  }
  {
    STORE_ASSIGN_OR_RETURN(
        Stmt s, db_->Prepare("UPDATE tasks SET state = 'done', result = ?, result_attempt = ?, "
                             "result_worker = ?, lease_expires_at = NULL, updated_at = ? WHERE id = ?"));
    s.BindBlob(result).BindInt(attempt).BindText(worker_id).BindInt(now).BindText(task_id);
    STORE_RETURN_IF_ERROR(WithContext(s.Run(), absl::StrCat("storing the result of task ", task_id)));
  }
  STORE_RETURN_IF_ERROR(txn.Commit());
  return TaskResultOutcome::kAccepted;
}

absl::StatusOr<bool> Store::ReleaseTask(const std::string& task_id, int32_t attempt,
                                        const std::string& worker_id) {
  absl::MutexLock lock(&mu_);
  STORE_ASSIGN_OR_RETURN(
      Stmt s, db_->Prepare("UPDATE tasks SET state = 'queued', lease_owner = NULL, lease_slot = NULL, "
                           "lease_expires_at = NULL, lease_gpu = NULL, updated_at = ? WHERE id = ? AND attempt = ? "
                           "AND lease_owner = ? AND state = 'leased' AND lease_expires_at >= ?"));
  const int64_t now = Now();
  s.BindInt(now).BindText(task_id).BindInt(attempt).BindText(worker_id).BindInt(now);
  STORE_RETURN_IF_ERROR(WithContext(s.Run(), absl::StrCat("releasing task ", task_id)));
  return db_->Changes() > 0;
}

absl::StatusOr<int64_t> Store::ExtendLeases(int64_t lease_ms) {
  absl::MutexLock lock(&mu_);
  STORE_ASSIGN_OR_RETURN(
      Stmt s, db_->Prepare("UPDATE tasks SET lease_expires_at = max(lease_expires_at, ?) WHERE state = 'leased'"));
  s.BindInt(Now() + lease_ms);
  STORE_RETURN_IF_ERROR(WithContext(s.Run(), "extending the leases held at start"));
  return db_->Changes();
}

absl::StatusOr<int64_t> Store::ExpireLeases() {
  absl::MutexLock lock(&mu_);
  return RequeueExpired(*db_, Now());
}

absl::StatusOr<TaskRecord> Store::GetTask(const std::string& task_id) {
  absl::MutexLock lock(&mu_);
  STORE_ASSIGN_OR_RETURN(std::optional<TaskRecord> t, LoadTask(*db_, task_id));
  if (!t.has_value()) return absl::NotFoundError(absl::StrCat("no task ", task_id));
  return *std::move(t);
}

absl::StatusOr<int64_t> Store::CancelTasks(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  STORE_ASSIGN_OR_RETURN(
      Stmt s, db_->Prepare("UPDATE tasks SET state = 'cancelled', lease_expires_at = NULL, "
                           "updated_at = ? WHERE job_id = ? AND state IN ('queued', 'leased')"));
  s.BindInt(Now()).BindText(job_id);
  STORE_RETURN_IF_ERROR(WithContext(s.Run(), absl::StrCat("cancelling the tasks of job ", job_id)));
  return db_->Changes();
}

absl::StatusOr<int64_t> Store::ParkTasks(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  STORE_ASSIGN_OR_RETURN(
      Stmt s, db_->Prepare("UPDATE tasks SET parked = 1, updated_at = ? WHERE job_id = ? AND state = 'queued' "
                           "AND parked = 0"));
  s.BindInt(Now()).BindText(job_id);
  STORE_RETURN_IF_ERROR(WithContext(s.Run(), absl::StrCat("parking the tasks of job ", job_id)));
  return db_->Changes();
}

absl::Status Store::MarkTaskCollected(const std::string& task_id) {
  absl::MutexLock lock(&mu_);
  STORE_ASSIGN_OR_RETURN(Stmt s, db_->Prepare("UPDATE tasks SET collected = 1 WHERE id = ?"));
  s.BindText(task_id);
  return WithContext(s.Run(), absl::StrCat("marking task ", task_id, " collected"));
}

absl::StatusOr<TaskCounts> Store::CountTasks() {
  absl::MutexLock lock(&mu_);
  STORE_ASSIGN_OR_RETURN(
      Stmt s, db_->Prepare("SELECT coalesce(sum(state = 'queued'), 0), "
                           "coalesce(sum(state = 'leased'), 0), coalesce(sum(state = 'done'), 0), "
                           "coalesce(sum(state = 'cancelled'), 0), coalesce(sum(expired_leases), 0) "
                           "FROM tasks"));
  STORE_ASSIGN_OR_RETURN(bool row, s.Step());
  TaskCounts c;
  if (!row) return c;
  c.queued = s.Int(0);
  c.leased = s.Int(1);
  c.done = s.Int(2);
  c.cancelled = s.Int(3);
  c.expired_leases = s.Int(4);
  return c;
}

absl::StatusOr<std::vector<TaskRecord>> Store::ListTasks(const std::string& state, int limit) {
  absl::MutexLock lock(&mu_);
  STORE_ASSIGN_OR_RETURN(
      Stmt s, db_->Prepare(absl::StrCat("SELECT ", kTaskColumns,
                                        " FROM tasks WHERE ? = '' OR state = ? "
                                        "ORDER BY created_at, id LIMIT ?")));
  s.BindText(state).BindText(state).BindInt(std::max(limit, 1));
  std::vector<TaskRecord> tasks;
  while (true) {
    STORE_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return tasks;
    tasks.push_back(ReadTask(s));
  }
}

}  // namespace anvil
