// Store: opening, the problems table, counts, and the helpers every
// subsystem file shares (internal.h).
#include "store/store.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "proto/problem.h"
#include "store/codec.h"
#include "store/internal.h"
#include "store/schema.h"

namespace anvil {

using store_internal::Db;
using store_internal::Stmt;

namespace store_internal {

absl::Status WithContext(const absl::Status& status, absl::string_view context) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(context, ": ", status.message()));
}

std::string Placeholders(int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += i == 0 ? "?" : ", ?";
  return out;
}

absl::Status ValidateProblemKey(const v1::Problem& problem) {
  if (problem.gpu().empty() || problem.arch().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("problem ", ProblemName(problem), " needs its gpu and arch to be stored"));
  }
  return ValidateProblem(problem);
}

absl::StatusOr<std::optional<int64_t>> FindProblemId(Db& db, const v1::Problem& problem) {
  static const std::string kSql = absl::StrCat(
      "SELECT id FROM problems WHERE gpu = ? AND arch = ? AND m = ? AND n = ? AND k = ? "
      "AND layout = ? AND dtype = ?");
  STORE_ASSIGN_OR_RETURN(Stmt stmt, db.Prepare(kSql));
  BindProblem(stmt, problem);
  STORE_ASSIGN_OR_RETURN(bool row, stmt.Step());
  if (!row) return std::optional<int64_t>();
  return std::optional<int64_t>(stmt.Int(0));
}

absl::StatusOr<int64_t> UpsertProblemRow(Db& db, const v1::Problem& problem) {
  STORE_RETURN_IF_ERROR(ValidateProblemKey(problem));
  STORE_ASSIGN_OR_RETURN(std::optional<int64_t> id, FindProblemId(db, problem));
  if (id.has_value()) return *id;
  static const std::string kSql = absl::StrCat("INSERT INTO problems (", ProblemColumns(""),
                                               ") VALUES (", Placeholders(7), ")");
  STORE_ASSIGN_OR_RETURN(Stmt stmt, db.Prepare(kSql));
  BindProblem(stmt, problem);
  STORE_RETURN_IF_ERROR(WithContext(stmt.Run(), "storing problem"));
  return db.LastInsertId();
}

}  // namespace store_internal

absl::StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& path,
                                                   const Options& options) {
  STORE_ASSIGN_OR_RETURN(store_internal::OpenedDb opened,
                         store_internal::OpenDatabase(path, options));
  return std::unique_ptr<Store>(
      new Store(path, options, std::move(opened.db), opened.schema_version));
}

Store::Store(std::string path, Options options, std::unique_ptr<Db> db, int schema_version)
    : path_(std::move(path)),
      options_(std::move(options)),
      schema_version_(schema_version),
      db_(std::move(db)) {}

Store::~Store() = default;

int Store::LatestSchemaVersion() { return store_internal::LatestSchemaVersion(); }

int64_t Store::Now() const {
  if (options_.now_unix_ms) return options_.now_unix_ms();
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

absl::StatusOr<int64_t> Store::UpsertProblem(const v1::Problem& problem) {
  absl::MutexLock lock(&mu_);
  return store_internal::UpsertProblemRow(*db_, problem);
}

absl::StatusOr<int64_t> Store::CountMeasurements(const v1::Problem& problem) {
  absl::MutexLock lock(&mu_);
  STORE_ASSIGN_OR_RETURN(std::optional<int64_t> problem_id,
                         store_internal::FindProblemId(*db_, problem));
  if (!problem_id.has_value()) return 0;
  STORE_ASSIGN_OR_RETURN(Stmt stmt,
                         db_->Prepare("SELECT count(*) FROM measurements WHERE problem_id = ?"));
  stmt.BindInt(*problem_id);
  STORE_ASSIGN_OR_RETURN(bool row, stmt.Step());
  return row ? stmt.Int(0) : 0;
}

absl::StatusOr<StoreCounts> Store::Counts() {
  absl::MutexLock lock(&mu_);
  STORE_ASSIGN_OR_RETURN(
      Stmt stmt,
      db_->Prepare("SELECT (SELECT count(*) FROM problems), (SELECT count(*) FROM candidates), "
                   "(SELECT count(*) FROM builds), (SELECT count(*) FROM measurements), "
                   "(SELECT count(*) FROM baselines), (SELECT count(*) FROM rewards), "
                   "(SELECT count(*) FROM jobs), (SELECT count(*) FROM workers), "
                   "(SELECT count(*) FROM llm_exchanges)"));
  STORE_ASSIGN_OR_RETURN(bool row, stmt.Step());
  StoreCounts counts;
  if (!row) return counts;
  int c = 0;
  for (int64_t* field :
       {&counts.problems, &counts.candidates, &counts.builds, &counts.measurements,
        &counts.baselines, &counts.rewards, &counts.jobs, &counts.workers, &counts.llm_exchanges}) {
    *field = stmt.Int(c++);
  }
  return counts;
}

}  // namespace anvil
