#include "store/sqlite.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace anvil::store_internal {
namespace {

absl::Status ConstraintStatus(int rc, const std::string& message) {
  switch (rc) {
    case SQLITE_CONSTRAINT_PRIMARYKEY:
    case SQLITE_CONSTRAINT_UNIQUE:
    case SQLITE_CONSTRAINT_ROWID:
      return absl::AlreadyExistsError(message);
    default:  // FOREIGNKEY, NOTNULL, CHECK, TRIGGER, ...
      return absl::InvalidArgumentError(message);
  }
}

}  // namespace

absl::Status SqliteStatus(int rc, absl::string_view context, absl::string_view sqlite_message) {
  std::string message = absl::StrCat(context, ": ", sqlite_message);
  switch (rc & 0xff) {
    case SQLITE_OK:
    case SQLITE_ROW:
    case SQLITE_DONE:
      return absl::OkStatus();
    case SQLITE_FULL:
      return absl::ResourceExhaustedError(absl::StrCat("disk or database full: ", message));
    case SQLITE_NOMEM:
      return absl::ResourceExhaustedError(absl::StrCat("out of memory: ", message));
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return absl::UnavailableError(absl::StrCat("database busy: ", message));
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return absl::DataLossError(message);
    case SQLITE_CONSTRAINT:
      return ConstraintStatus(rc, message);
    case SQLITE_READONLY:
      return absl::FailedPreconditionError(absl::StrCat("read-only: ", message));
    case SQLITE_CANTOPEN:
      return absl::FailedPreconditionError(message);
    case SQLITE_PERM:
    case SQLITE_AUTH:
      return absl::PermissionDeniedError(message);
    case SQLITE_IOERR:
      return absl::UnavailableError(absl::StrCat("I/O error: ", message));
    case SQLITE_INTERRUPT:
      return absl::CancelledError(message);
    case SQLITE_TOOBIG:
    case SQLITE_RANGE:
    case SQLITE_MISMATCH:
      return absl::InvalidArgumentError(message);
    default:
      return absl::InternalError(absl::StrCat("sqlite error ", rc, ": ", message));
  }
}

absl::Status SqliteStatus(int rc, sqlite3* db, absl::string_view context) {
  return SqliteStatus(rc, context, db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
}

// ---- Stmt ----

Stmt::Stmt(sqlite3* db, sqlite3_stmt* stmt, bool* in_use) : db_(db), stmt_(stmt), in_use_(in_use) {}

Stmt::Stmt(Stmt&& other) noexcept
    : db_(other.db_),
      stmt_(std::exchange(other.stmt_, nullptr)),
      in_use_(other.in_use_),
      next_param_(other.next_param_),
      bind_status_(std::move(other.bind_status_)) {}

Stmt::~Stmt() {
  if (stmt_ == nullptr) return;
  if (in_use_ == nullptr) {
    sqlite3_finalize(stmt_);
    return;
  }
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
  *in_use_ = false;
}

absl::Status Stmt::BindResult(int rc) {
  if (rc != SQLITE_OK && bind_status_.ok()) {
    bind_status_ = SqliteStatus(rc, db_, absl::StrCat("binding parameter ", next_param_));
  }
  ++next_param_;
  return bind_status_;
}

Stmt& Stmt::BindInt(int64_t value) {
  BindResult(sqlite3_bind_int64(stmt_, next_param_, value)).IgnoreError();
  return *this;
}

Stmt& Stmt::BindReal(double value) {
  BindResult(sqlite3_bind_double(stmt_, next_param_, value)).IgnoreError();
  return *this;
}

Stmt& Stmt::BindText(absl::string_view value) {
  BindResult(sqlite3_bind_text64(stmt_, next_param_, value.data(), value.size(), SQLITE_TRANSIENT,
                                 SQLITE_UTF8))
      .IgnoreError();
  return *this;
}

Stmt& Stmt::BindBlob(absl::string_view bytes) {
  // A zero-length blob is still a blob (not NULL): pass a non-null pointer.
  static const char kEmpty = 0;
  const char* data = bytes.empty() ? &kEmpty : bytes.data();
  BindResult(sqlite3_bind_blob64(stmt_, next_param_, data, bytes.size(), SQLITE_TRANSIENT))
      .IgnoreError();
  return *this;
}

Stmt& Stmt::BindNull() {
  BindResult(sqlite3_bind_null(stmt_, next_param_)).IgnoreError();
  return *this;
}

Stmt& Stmt::BindTextOrNull(absl::string_view value) {
  return value.empty() ? BindNull() : BindText(value);
}

absl::StatusOr<bool> Stmt::Step() {
  if (!bind_status_.ok()) return bind_status_;
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return SqliteStatus(rc, db_, "sqlite");
}

absl::Status Stmt::Run() {
  while (true) {
    absl::StatusOr<bool> row = Step();
    if (!row.ok()) return row.status();
    if (!*row) return absl::OkStatus();
  }
}

bool Stmt::IsNull(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
int64_t Stmt::Int(int col) const { return sqlite3_column_int64(stmt_, col); }
double Stmt::Real(int col) const { return sqlite3_column_double(stmt_, col); }

std::string Stmt::Text(int col) const {
  const unsigned char* text = sqlite3_column_text(stmt_, col);
  if (text == nullptr) return "";
  return std::string(reinterpret_cast<const char*>(text), sqlite3_column_bytes(stmt_, col));
}

std::string Stmt::Blob(int col) const {
  const void* data = sqlite3_column_blob(stmt_, col);
  if (data == nullptr) return "";
  return std::string(static_cast<const char*>(data), sqlite3_column_bytes(stmt_, col));
}

// ---- Db ----

absl::StatusOr<std::unique_ptr<Db>> Db::Open(const std::string& path, int flags) {
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &raw, flags | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    absl::Status status = SqliteStatus(rc, raw, absl::StrCat("cannot open ", path));
    sqlite3_close_v2(raw);
    return status;
  }
  sqlite3_extended_result_codes(raw, 1);
  return std::unique_ptr<Db>(new Db(raw, path));
}

Db::~Db() {
  for (auto& [sql, cached] : cache_) sqlite3_finalize(cached.stmt);
  sqlite3_close_v2(db_);
}

absl::StatusOr<Stmt> Db::Prepare(const std::string& sql) {
  auto it = cache_.find(sql);
  if (it != cache_.end() && !it->second.in_use) {
    it->second.in_use = true;
    return Stmt(db_, it->second.stmt, &it->second.in_use);
  }
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()),
                              SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
  if (rc != SQLITE_OK) {
    return SqliteStatus(rc, db_, absl::StrCat("preparing [", sql.substr(0, 60), "]"));
  }
  if (it != cache_.end()) return Stmt(db_, stmt, nullptr);  // nested use: owned
  Cached& cached = cache_[sql];
  cached.stmt = stmt;
  cached.in_use = true;
  return Stmt(db_, stmt, &cached.in_use);
}

absl::Status Db::Exec(const std::string& sql) {
  char* error = nullptr;
  int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error);
  if (rc == SQLITE_OK) return absl::OkStatus();
  std::string message = error != nullptr ? error : sqlite3_errstr(rc);
  sqlite3_free(error);
  return SqliteStatus(rc, "sqlite", message);
}

absl::StatusOr<int64_t> Db::QueryInt(const std::string& sql) {
  STORE_ASSIGN_OR_RETURN(Stmt stmt, Prepare(sql));
  STORE_ASSIGN_OR_RETURN(bool row, stmt.Step());
  if (!row) return absl::InternalError(absl::StrCat("no row from [", sql, "]"));
  return stmt.Int(0);
}

absl::StatusOr<std::string> Db::QueryText(const std::string& sql) {
  STORE_ASSIGN_OR_RETURN(Stmt stmt, Prepare(sql));
  STORE_ASSIGN_OR_RETURN(bool row, stmt.Step());
  if (!row) return absl::InternalError(absl::StrCat("no row from [", sql, "]"));
  return stmt.Text(0);
}

// ---- Transaction ----

absl::Status Transaction::Begin() {
  STORE_RETURN_IF_ERROR(db_.Exec("BEGIN IMMEDIATE"));
  open_ = true;
  return absl::OkStatus();
}

absl::Status Transaction::Commit() {
  absl::Status status = db_.Exec("COMMIT");
  if (status.ok()) open_ = false;
  return status;  // on failure the destructor rolls back
}

Transaction::~Transaction() {
  // SQLite may already have rolled back (e.g. after SQLITE_FULL).
  if (open_ && sqlite3_get_autocommit(db_.raw()) == 0) {
    db_.Exec("ROLLBACK").IgnoreError();
  }
}

}  // namespace anvil::store_internal
