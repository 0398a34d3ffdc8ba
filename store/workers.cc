// Store: the fleet's workers: registration, heartbeats, credentials,
// throughput, quarantine and the evidence held against them. Schema:
// SCHEMA.md, "Tasks" and "Workers".
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "store/codec.h"
#include "store/internal.h"
#include "store/store.h"

namespace anvil {

using store_internal::Db;
using store_internal::Stmt;
using store_internal::Transaction;
using store_internal::WithContext;

namespace {

constexpr char kWorkerSelect[] =
    "SELECT id, hostname, gpus, build_jobs, versions, registered_at, last_heartbeat_at, state, "
    "quarantine_reason, infra_failures, builds, build_seconds, measures, measure_seconds, "
    "credential_sha256, "
    "(SELECT count(*) FROM worker_evidence e WHERE e.worker_id = workers.id AND e.kind = 'disagreement' "
    "AND NOT e.settled), "
    "coalesce((SELECT e.detail FROM worker_evidence e WHERE e.worker_id = workers.id "
    "ORDER BY e.at DESC, e.id DESC LIMIT 1), '') "
    "FROM workers ";

absl::Status ReadWorker(const Stmt& s, WorkerRecord& w) {
  w.id = s.Text(0);
  w.hostname = s.Text(1);
  STORE_RETURN_IF_ERROR(
      store_internal::ParseMessageListJson(s.Text(2), [&w] { return &w.gpus.emplace_back(); }));
  w.build_jobs = static_cast<int32_t>(s.Int(3));
  w.versions = s.Text(4);
  w.registered_unix_ms = s.Int(5);
  w.last_heartbeat_unix_ms = s.Int(6);
  w.state = s.Text(7);
  w.quarantine_reason = s.Text(8);
  w.infra_failures = static_cast<int32_t>(s.Int(9));
  w.builds = s.Int(10);
  w.build_seconds = s.Real(11);
  w.measures = s.Int(12);
  w.measure_seconds = s.Real(13);
  w.credential_sha256 = s.Text(14);
  w.disagreements = s.Int(15);
  w.last_evidence = s.Text(16);
  return absl::OkStatus();
}

absl::StatusOr<WorkerRecord> LoadWorker(Db& db, const std::string& worker_id) {
  STORE_ASSIGN_OR_RETURN(Stmt s, db.Prepare(absl::StrCat(kWorkerSelect, "WHERE id = ?")));
  s.BindText(worker_id);
  STORE_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return absl::NotFoundError(absl::StrCat("no worker ", worker_id));
  WorkerRecord w;
  STORE_RETURN_IF_ERROR(ReadWorker(s, w));
  return w;
}

absl::Status InsertEvidence(Db& db, const WorkerEvidence& e, int64_t now) {
  STORE_ASSIGN_OR_RETURN(
      Stmt s, db.Prepare("INSERT INTO worker_evidence (worker_id, kind, task_id, candidate_id, problem, "
                         "other_worker, detail, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"));
  s.BindText(e.worker_id).BindText(e.kind).BindText(e.task_id).BindText(e.candidate_id);
  s.BindText(e.problem).BindText(e.other_worker).BindText(e.detail).BindInt(now);
  return WithContext(s.Run(), absl::StrCat("recording evidence against worker ", e.worker_id));
}

// Disagreements with at least two other workers, `quarantine_after` or more
// in all: the worker is the odd one out, not merely one side of a pair.
absl::StatusOr<std::string> DisagreementVerdict(Db& db, const std::string& worker_id, int quarantine_after) {
  STORE_ASSIGN_OR_RETURN(
      Stmt s, db.Prepare("SELECT other_worker, detail FROM worker_evidence WHERE worker_id = ? "
                         "AND kind = 'disagreement' AND NOT settled ORDER BY at DESC, id DESC"));
  s.BindText(worker_id);
  std::set<std::string> others;
  std::vector<std::string> details;
  int64_t n = 0;
  while (true) {
    STORE_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    ++n;
    others.insert(s.Text(0));
    if (details.size() < 3) details.push_back(s.Text(1));
  }
  if (others.size() < 2 || n < quarantine_after) return std::string();
  return absl::StrCat("its figures disagreed with those of ", others.size(),
                      " other workers on the same candidates (latest: ", absl::StrJoin(details, "; "), ")");
}

}  // namespace

absl::Status Store::UpsertWorker(const WorkerRecord& w) {
  if (w.id.empty()) return absl::InvalidArgumentError("worker id is empty");
  google::protobuf::RepeatedPtrField<v1::GpuInfo> gpus(w.gpus.begin(), w.gpus.end());
  STORE_ASSIGN_OR_RETURN(std::string gpus_json, store_internal::MessageListJson(gpus));
  absl::MutexLock lock(&mu_);
  STORE_ASSIGN_OR_RETURN(
      Stmt s,
      db_->Prepare("INSERT INTO workers (id, hostname, gpus, build_jobs, versions, "
                   "registered_at, last_heartbeat_at, state, credential_sha256) "
                   "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
                   "ON CONFLICT (id) DO UPDATE SET hostname = excluded.hostname, "
                   "gpus = excluded.gpus, build_jobs = excluded.build_jobs, "
                   "versions = excluded.versions, "
                   "last_heartbeat_at = excluded.last_heartbeat_at, state = excluded.state, "
                   "credential_sha256 = excluded.credential_sha256"));
  const int64_t now = Now();
  s.BindText(w.id).BindText(w.hostname).BindText(gpus_json).BindInt(w.build_jobs);
  s.BindText(w.versions).BindInt(w.registered_unix_ms != 0 ? w.registered_unix_ms : now);
  s.BindInt(now).BindText(w.state).BindText(w.credential_sha256);
  return WithContext(s.Run(), absl::StrCat("storing worker ", w.id));
}

absl::Status Store::RecordHeartbeat(const std::string& worker_id) {
  absl::MutexLock lock(&mu_);
  STORE_ASSIGN_OR_RETURN(Stmt s,
                         db_->Prepare("UPDATE workers SET last_heartbeat_at = ? WHERE id = ?"));
  s.BindInt(Now()).BindText(worker_id);
  STORE_RETURN_IF_ERROR(s.Run());
  if (db_->Changes() == 0) return absl::NotFoundError(absl::StrCat("no worker ", worker_id));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<WorkerRecord>> Store::ListWorkers() {
  absl::MutexLock lock(&mu_);
  STORE_ASSIGN_OR_RETURN(Stmt s, db_->Prepare(absl::StrCat(kWorkerSelect, "ORDER BY registered_at, id")));
  std::vector<WorkerRecord> workers;
  while (true) {
    STORE_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return workers;
    STORE_RETURN_IF_ERROR(ReadWorker(s, workers.emplace_back()));
  }
}

absl::StatusOr<WorkerRecord> Store::GetWorker(const std::string& worker_id) {
  absl::MutexLock lock(&mu_);
  return LoadWorker(*db_, worker_id);
}

absl::StatusOr<WorkerRecord> Store::RecordWorkerRun(const std::string& worker_id,
                                                    const std::string& kind, double seconds,
                                                    bool infra_failure, const std::string& reason,
                                                    int quarantine_after) {
  absl::MutexLock lock(&mu_);
  const bool build = kind == "build";
  // Streaks by kind: a clean build does not excuse a GPU slot that keeps
  // failing its measurements, nor the other way round.
  const char* streak = build ? "build_failures" : "infra_failures";
  STORE_ASSIGN_OR_RETURN(
      Stmt s,
      db_->Prepare(absl::StrCat(
          "UPDATE workers SET builds = builds + ?, build_seconds = build_seconds + ?, "
          "measures = measures + ?, measure_seconds = measure_seconds + ?, ",
          streak, " = CASE WHEN ? THEN ", streak, " + 1 ELSE 0 END, "
          "quarantine_reason = CASE WHEN ? AND ", streak, " + 1 >= ? AND quarantine_reason = '' "
          "  THEN ? ELSE quarantine_reason END, "
          "state = CASE WHEN ? AND ", streak, " + 1 >= ? THEN 'quarantined' ELSE state END "
          "WHERE id = ?")));
  s.BindInt(build ? 1 : 0).BindReal(build ? seconds : 0).BindInt(build ? 0 : 1);
  s.BindReal(build ? 0 : seconds).BindInt(infra_failure ? 1 : 0);
  s.BindInt(infra_failure ? 1 : 0).BindInt(quarantine_after).BindText(reason);
  s.BindInt(infra_failure ? 1 : 0).BindInt(quarantine_after).BindText(worker_id);
  STORE_RETURN_IF_ERROR(WithContext(s.Run(), absl::StrCat("counting a run of worker ", worker_id)));
  if (db_->Changes() == 0) return absl::NotFoundError(absl::StrCat("no worker ", worker_id));
  return LoadWorker(*db_, worker_id);
}

absl::StatusOr<WorkerRecord> Store::RecordEvidence(const WorkerEvidence& e, int quarantine_after) {
  if (e.kind != "infrastructure" && e.kind != "malformed_report" && e.kind != "disagreement") {
    return absl::InvalidArgumentError(absl::StrCat("evidence kind '", e.kind, "' is unknown"));
  }
  absl::MutexLock lock(&mu_);
  Transaction txn(*db_);
  STORE_RETURN_IF_ERROR(txn.Begin());
  STORE_ASSIGN_OR_RETURN(WorkerRecord w, LoadWorker(*db_, e.worker_id));
  STORE_RETURN_IF_ERROR(InsertEvidence(*db_, e, Now()));
  if (e.kind == "disagreement" && w.quarantine_reason.empty()) {
    STORE_ASSIGN_OR_RETURN(std::string why, DisagreementVerdict(*db_, e.worker_id, quarantine_after));
    if (!why.empty()) {
      STORE_ASSIGN_OR_RETURN(
          Stmt s, db_->Prepare("UPDATE workers SET quarantine_reason = ?, state = 'quarantined' WHERE id = ?"));
      s.BindText(why).BindText(e.worker_id);
      STORE_RETURN_IF_ERROR(s.Run());
    }
  }
  STORE_ASSIGN_OR_RETURN(w, LoadWorker(*db_, e.worker_id));
  STORE_RETURN_IF_ERROR(txn.Commit());
  return w;
}

absl::StatusOr<std::vector<WorkerEvidence>> Store::ListEvidence(const std::string& worker_id, int limit) {
  absl::MutexLock lock(&mu_);
  STORE_ASSIGN_OR_RETURN(
      Stmt s, db_->Prepare("SELECT worker_id, kind, task_id, candidate_id, problem, other_worker, detail, at "
                           "FROM worker_evidence WHERE ? = '' OR worker_id = ? "
                           "ORDER BY at DESC, id DESC LIMIT ?"));
  s.BindText(worker_id).BindText(worker_id).BindInt(std::max(limit, 1));
  std::vector<WorkerEvidence> out;
  while (true) {
    STORE_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return out;
    WorkerEvidence& e = out.emplace_back();
    e.worker_id = s.Text(0);
    e.kind = s.Text(1);
    e.task_id = s.Text(2);
    e.candidate_id = s.Text(3);
    e.problem = s.Text(4);
    e.other_worker = s.Text(5);
    e.detail = s.Text(6);
    e.at_unix_ms = s.Int(7);
  }
}

absl::Status Store::ClearQuarantine(const std::string& worker_id) {
  absl::MutexLock lock(&mu_);
  Transaction txn(*db_);
  STORE_RETURN_IF_ERROR(txn.Begin());
  STORE_ASSIGN_OR_RETURN(
      Stmt s, db_->Prepare("UPDATE workers SET quarantine_reason = '', infra_failures = 0, "
                           "build_failures = 0, state = 'alive' WHERE id = ?"));
  s.BindText(worker_id);
  STORE_RETURN_IF_ERROR(s.Run());
  if (db_->Changes() == 0) return absl::NotFoundError(absl::StrCat("no worker ", worker_id));
  // The evidence held against it is settled: kept for the record, it counts no more.
  STORE_ASSIGN_OR_RETURN(Stmt d, db_->Prepare("UPDATE worker_evidence SET settled = 1 WHERE worker_id = ?"));
  d.BindText(worker_id);
  STORE_RETURN_IF_ERROR(d.Run());
  return txn.Commit();
}

}  // namespace anvil
