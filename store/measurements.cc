// Store: measurements with their baselines and timing samples.
#include <span>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "proto/figures.h"
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

const std::string& InsertMeasurementSql() {
  static const std::string sql = absl::StrCat(
      "INSERT INTO measurements (candidate_id, problem_id, job_id, verdict, reason, detail, "
      "rel_err, exact_max_abs_err, ",
      TimingColumns(""),
      ", sol_us, efficiency, graph_capturable, kernels_per_call, kernel_names, "
      "streams_per_call, workspace_bytes, profile, gpu_uuid, worker, measured_at, seconds, "
      "versions, verified, created_at, graph_note, fidelity) VALUES (",
      Placeholders(8 + kTimingColumnCount + 17), ")");
  return sql;
}

const std::string& InsertBaselineSql() {
  static const std::string sql = absl::StrCat(
      "INSERT INTO baselines (measurement_id, name, ", TimingColumns(""),
      ", rel_err, kernels, algo_index) VALUES (", Placeholders(2 + kTimingColumnCount + 3), ")");
  return sql;
}

absl::Status InsertSamples(Db& db, int64_t measurement_id, std::optional<int64_t> baseline_id,
                           const v1::Timings& timings) {
  if (!HasSamples(timings)) return absl::OkStatus();
  static const std::string kSql = absl::StrCat("INSERT INTO samples (measurement_id, baseline_id, ",
                                               kSampleColumns, ") VALUES (", Placeholders(8), ")");
  STORE_ASSIGN_OR_RETURN(Stmt stmt, db.Prepare(kSql));
  stmt.BindInt(measurement_id);
  if (baseline_id.has_value()) {
    stmt.BindInt(*baseline_id);
  } else {
    stmt.BindNull();
  }
  BindSamples(stmt, timings);
  return stmt.Run();
}

absl::Status InsertBaseline(Db& db, int64_t measurement_id, const v1::Baseline& b) {
  {
    STORE_ASSIGN_OR_RETURN(Stmt stmt, db.Prepare(InsertBaselineSql()));
    stmt.BindInt(measurement_id).BindText(b.name());
    BindTimings(stmt, b.has_timings(), b.timings());
    stmt.BindReal(b.rel_err()).BindText(b.kernels()).BindInt(b.algo_index());
    STORE_RETURN_IF_ERROR(stmt.Run());
  }
  return InsertSamples(db, measurement_id, db.LastInsertId(), b.timings());
}

void BindMeasurement(Stmt& s, const v1::Measurement& m, int64_t problem_id,
                     const std::optional<std::string>& job_id, int64_t now) {
  s.BindText(m.candidate_id()).BindInt(problem_id);
  if (job_id.has_value()) {
    s.BindText(*job_id);
  } else {
    s.BindNull();
  }
  s.BindText(VerdictText(m.verdict())).BindText(m.reason()).BindText(m.detail());
  s.BindReal(m.rel_err()).BindReal(m.exact_max_abs_err());
  BindTimings(s, m.has_timings(), m.timings());
  s.BindReal(m.sol_us()).BindReal(m.efficiency()).BindInt(m.graph_capturable() ? 1 : 0);
  s.BindInt(m.kernels_per_call()).BindText(StringListJson(m.kernel_names()));
  s.BindInt(m.streams_per_call()).BindInt(m.workspace_bytes());
  s.BindText(DoubleMapJson(m.profile())).BindText(m.gpu_uuid()).BindText(m.worker());
  s.BindInt(m.measured_at_unix_ms() != 0 ? m.measured_at_unix_ms() : now);
  s.BindReal(m.seconds()).BindText(m.versions()).BindInt(m.verified() ? 1 : 0).BindInt(now);
  s.BindText(m.graph_note());
  s.BindText(std::string(FidelityName(m.fidelity())));
}

absl::StatusOr<int64_t> InsertMeasurement(Db& db, const v1::Measurement& m,
                                          const std::optional<std::string>& job_id, int64_t now) {
  STORE_ASSIGN_OR_RETURN(bool known, CandidateExists(db, m.candidate_id()));
  if (!known) {
    return absl::InvalidArgumentError(
        absl::StrCat("candidate '", m.candidate_id(), "' is not stored; PutCandidate first"));
  }
  STORE_ASSIGN_OR_RETURN(int64_t problem_id, UpsertProblemRow(db, m.problem()));
  {
    STORE_ASSIGN_OR_RETURN(Stmt stmt, db.Prepare(InsertMeasurementSql()));
    BindMeasurement(stmt, m, problem_id, job_id, now);
    STORE_RETURN_IF_ERROR(stmt.Run());
  }
  int64_t id = db.LastInsertId();
  STORE_RETURN_IF_ERROR(InsertSamples(db, id, std::nullopt, m.timings()));
  for (const v1::Baseline& baseline : m.baselines()) {
    STORE_RETURN_IF_ERROR(InsertBaseline(db, id, baseline));
  }
  return id;
}

absl::Status ReadMeasurementColumns(const Stmt& s, StoredMeasurement* out) {
  v1::Measurement& m = out->measurement;
  out->id = s.Int(0);
  out->job_id = s.Text(1);
  m.set_candidate_id(s.Text(2));
  m.set_verdict(VerdictFromText(s.Text(3)));
  m.set_reason(s.Text(4));
  m.set_detail(s.Text(5));
  m.set_rel_err(s.Real(6));
  m.set_exact_max_abs_err(s.Real(7));
  bool has_timings = false;
  int c = ReadTimings(s, 8, m.mutable_timings(), &has_timings);
  if (!has_timings) m.clear_timings();
  m.set_sol_us(s.Real(c++));
  m.set_efficiency(s.Real(c++));
  m.set_graph_capturable(s.Int(c++) != 0);
  m.set_kernels_per_call(static_cast<int32_t>(s.Int(c++)));
  STORE_RETURN_IF_ERROR(ParseStringListJson(s.Text(c++), m.mutable_kernel_names()));
  m.set_streams_per_call(static_cast<int32_t>(s.Int(c++)));
  m.set_workspace_bytes(s.Int(c++));
  STORE_RETURN_IF_ERROR(ParseDoubleMapJson(s.Text(c++), m.mutable_profile()));
  m.set_gpu_uuid(s.Text(c++));
  m.set_worker(s.Text(c++));
  m.set_measured_at_unix_ms(s.Int(c++));
  m.set_seconds(s.Real(c++));
  m.set_versions(s.Text(c++));
  m.set_verified(s.Int(c++) != 0);
  m.set_graph_note(s.Text(c++));
  m.set_fidelity(s.Text(c++) == "screen" ? v1::FIDELITY_SCREEN : v1::FIDELITY_FULL);
  ReadProblem(s, c, m.mutable_problem());
  return absl::OkStatus();
}

// Loads baselines in insertion order; returns their row ids, index-aligned.
absl::StatusOr<std::vector<int64_t>> LoadBaselines(Db& db, int64_t id, v1::Measurement* m) {
  static const std::string kSql =
      absl::StrCat("SELECT id, name, ", TimingColumns(""),
                   ", rel_err, kernels, algo_index FROM baselines WHERE measurement_id = ? "
                   "ORDER BY id");
  STORE_ASSIGN_OR_RETURN(Stmt s, db.Prepare(kSql));
  s.BindInt(id);
  std::vector<int64_t> ids;
  while (true) {
    STORE_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    ids.push_back(s.Int(0));
    v1::Baseline* b = m->add_baselines();
    b->set_name(s.Text(1));
    bool has_timings = false;
    int c = ReadTimings(s, 2, b->mutable_timings(), &has_timings);
    if (!has_timings) b->clear_timings();
    b->set_rel_err(s.Real(c));
    b->set_kernels(s.Text(c + 1));
    b->set_algo_index(static_cast<int32_t>(s.Int(c + 2)));
  }
  return ids;
}

absl::Status LoadSamples(Db& db, int64_t id, const std::vector<int64_t>& baseline_ids,
                         v1::Measurement* m) {
  std::unordered_map<int64_t, int> index;
  for (size_t i = 0; i < baseline_ids.size(); ++i) index[baseline_ids[i]] = static_cast<int>(i);
  static const std::string kSql = absl::StrCat("SELECT baseline_id, ", kSampleColumns,
                                               " FROM samples WHERE measurement_id = ?");
  STORE_ASSIGN_OR_RETURN(Stmt s, db.Prepare(kSql));
  s.BindInt(id);
  while (true) {
    STORE_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return absl::OkStatus();
    v1::Timings* timings = m->mutable_timings();
    if (!s.IsNull(0)) {
      auto it = index.find(s.Int(0));
      if (it == index.end()) continue;
      timings = m->mutable_baselines(it->second)->mutable_timings();
    }
    STORE_RETURN_IF_ERROR(ReadSamples(s, 1, timings));
  }
}

}  // namespace

const std::string& MeasurementSelect() {
  static const std::string sql = absl::StrCat(
      "SELECT m.id, m.job_id, m.candidate_id, m.verdict, m.reason, m.detail, m.rel_err, "
      "m.exact_max_abs_err, ",
      TimingColumns("m."),
      ", m.sol_us, m.efficiency, m.graph_capturable, m.kernels_per_call, m.kernel_names, "
      "m.streams_per_call, m.workspace_bytes, m.profile, m.gpu_uuid, m.worker, m.measured_at, "
      "m.seconds, m.versions, m.verified, m.graph_note, m.fidelity, ",
      ProblemColumns("p."), " FROM measurements m JOIN problems p ON p.id = m.problem_id ");
  return sql;
}

absl::StatusOr<StoredMeasurement> ReadMeasurementRow(Db& db, const Stmt& row, Detail detail) {
  StoredMeasurement out;
  STORE_RETURN_IF_ERROR(WithContext(ReadMeasurementColumns(row, &out),
                                    absl::StrCat("reading measurement ", row.Int(0))));
  STORE_ASSIGN_OR_RETURN(std::vector<int64_t> baseline_ids,
                         LoadBaselines(db, out.id, &out.measurement));
  if (detail == Detail::kFull) {
    STORE_RETURN_IF_ERROR(LoadSamples(db, out.id, baseline_ids, &out.measurement));
  }
  return out;
}

absl::StatusOr<std::optional<StoredMeasurement>> LoadMeasurement(Db& db, int64_t id,
                                                                 Detail detail) {
  static const std::string kSql = absl::StrCat(MeasurementSelect(), "WHERE m.id = ?");
  STORE_ASSIGN_OR_RETURN(Stmt stmt, db.Prepare(kSql));
  stmt.BindInt(id);
  STORE_ASSIGN_OR_RETURN(bool row, stmt.Step());
  if (!row) return std::optional<StoredMeasurement>();
  STORE_ASSIGN_OR_RETURN(StoredMeasurement m, ReadMeasurementRow(db, stmt, detail));
  return std::optional<StoredMeasurement>(std::move(m));
}

}  // namespace store_internal

absl::StatusOr<std::vector<int64_t>> Store::PutMeasurements(
    std::span<const v1::Measurement> measurements, const std::optional<std::string>& job_id) {
  absl::MutexLock lock(&mu_);
  Transaction txn(*db_);
  STORE_RETURN_IF_ERROR(txn.Begin());
  if (job_id.has_value()) {
    STORE_ASSIGN_OR_RETURN(bool found, store_internal::JobExists(*db_, *job_id));
    if (!found)
      return absl::InvalidArgumentError(absl::StrCat("job '", *job_id, "' is not stored"));
  }
  const int64_t now = Now();
  std::vector<int64_t> ids;
  ids.reserve(measurements.size());
  for (size_t i = 0; i < measurements.size(); ++i) {
    absl::StatusOr<int64_t> id =
        store_internal::InsertMeasurement(*db_, measurements[i], job_id, now);
    if (!id.ok()) {
      return WithContext(id.status(), absl::StrCat("storing measurements[", i,
                                                   "] (nothing of "
                                                   "this batch was stored)"));
    }
    ids.push_back(*id);
  }
  STORE_RETURN_IF_ERROR(txn.Commit());
  return ids;
}

absl::StatusOr<int64_t> Store::PutMeasurement(const v1::Measurement& measurement,
                                              const std::optional<std::string>& job_id) {
  STORE_ASSIGN_OR_RETURN(
      std::vector<int64_t> ids,
      PutMeasurements(std::span<const v1::Measurement>(&measurement, 1), job_id));
  return ids.front();
}

absl::StatusOr<StoredMeasurement> Store::GetMeasurement(int64_t id) {
  absl::MutexLock lock(&mu_);
  STORE_ASSIGN_OR_RETURN(std::optional<StoredMeasurement> m,
                         store_internal::LoadMeasurement(*db_, id, store_internal::Detail::kFull));
  if (!m.has_value()) return absl::NotFoundError(absl::StrCat("no measurement ", id));
  return *std::move(m);
}

absl::Status Store::MarkVerified(int64_t measurement_id) {
  absl::MutexLock lock(&mu_);
  STORE_ASSIGN_OR_RETURN(Stmt stmt,
                         db_->Prepare("UPDATE measurements SET verified = 1 WHERE id = ?"));
  stmt.BindInt(measurement_id);
  STORE_RETURN_IF_ERROR(stmt.Run());
  if (db_->Changes() == 0) {
    return absl::NotFoundError(absl::StrCat("no measurement ", measurement_id));
  }
  return absl::OkStatus();
}

}  // namespace anvil
