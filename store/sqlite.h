// Internal to store/: a thin RAII layer over the SQLite C API. Db owns one
// connection and a cache of prepared statements; Stmt borrows one statement
// and resets it when it goes out of scope; Transaction rolls back unless
// committed. SQLite result codes become absl::Status in one place
// (SqliteStatus).
//
// Thread-safety: none. The Store serialises every use of a Db with its mutex.
#ifndef ANVIL_STORE_SQLITE_H_
#define ANVIL_STORE_SQLITE_H_

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#define STORE_CONCAT_INNER_(a, b) a##b
#define STORE_CONCAT_(a, b) STORE_CONCAT_INNER_(a, b)

// Returns the status of expr from the calling function unless it is OK.
#define STORE_RETURN_IF_ERROR(expr)                \
  do {                                             \
    ::absl::Status store_status_ = (expr);         \
    if (!store_status_.ok()) return store_status_; \
  } while (0)

// Evaluates expr (a StatusOr); returns its status unless OK, else assigns
// its value to lhs (which may be a declaration).
#define STORE_ASSIGN_OR_RETURN(lhs, expr) \
  STORE_ASSIGN_OR_RETURN_IMPL_(STORE_CONCAT_(store_statusor_, __LINE__), lhs, expr)
#define STORE_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(*tmp)

namespace anvil::store_internal {

// Maps an SQLite result code (extended codes included) to an absl::Status
// whose message starts with context and ends with SQLite's own message.
absl::Status SqliteStatus(int rc, absl::string_view context, absl::string_view sqlite_message);
// The same, with the message of db's last error.
absl::Status SqliteStatus(int rc, sqlite3* db, absl::string_view context);

// One statement in use. Parameters are bound in order (Bind* advances);
// columns are read by index. Movable, not copyable.
class Stmt {
 public:
  Stmt(sqlite3* db, sqlite3_stmt* stmt, bool* in_use);  // in_use null: owned
  Stmt(Stmt&& other) noexcept;
  Stmt& operator=(Stmt&&) = delete;
  Stmt(const Stmt&) = delete;
  ~Stmt();

  Stmt& BindInt(int64_t value);
  Stmt& BindReal(double value);
  Stmt& BindText(absl::string_view value);
  Stmt& BindBlob(absl::string_view bytes);
  Stmt& BindNull();
  Stmt& BindTextOrNull(absl::string_view value);  // empty -> NULL

  // Advances: true with a row ready, false when done.
  absl::StatusOr<bool> Step();
  // Steps to the end, ignoring rows.
  absl::Status Run();

  bool IsNull(int col) const;
  int64_t Int(int col) const;
  double Real(int col) const;
  std::string Text(int col) const;
  std::string Blob(int col) const;

 private:
  absl::Status BindResult(int rc);

  sqlite3* db_;
  sqlite3_stmt* stmt_;
  bool* in_use_;
  int next_param_ = 1;
  absl::Status bind_status_;
};

class Db {
 public:
  // flags: SQLITE_OPEN_* (READONLY or READWRITE|CREATE).
  static absl::StatusOr<std::unique_ptr<Db>> Open(const std::string& path, int flags);
  ~Db();
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  // A cached prepared statement for one SQL statement. If the cached one is
  // in use (nested queries), a fresh one is prepared and finalised after use.
  absl::StatusOr<Stmt> Prepare(const std::string& sql);
  // Runs one or more statements with no parameters and no results.
  absl::Status Exec(const std::string& sql);
  // Runs a statement returning one integer (e.g. a PRAGMA or COUNT).
  absl::StatusOr<int64_t> QueryInt(const std::string& sql);
  // Runs a statement returning one text value.
  absl::StatusOr<std::string> QueryText(const std::string& sql);

  int64_t LastInsertId() { return sqlite3_last_insert_rowid(db_); }
  int64_t Changes() { return sqlite3_changes64(db_); }
  sqlite3* raw() { return db_; }
  const std::string& path() const { return path_; }

 private:
  struct Cached {
    sqlite3_stmt* stmt = nullptr;
    bool in_use = false;
  };
  Db(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}

  sqlite3* db_;
  std::string path_;
  std::unordered_map<std::string, Cached> cache_;
};

// BEGIN IMMEDIATE ... COMMIT, rolled back on destruction unless committed.
class Transaction {
 public:
  explicit Transaction(Db& db) : db_(db) {}
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  absl::Status Begin();
  absl::Status Commit();

 private:
  Db& db_;
  bool open_ = false;
};

}  // namespace anvil::store_internal

#endif  // ANVIL_STORE_SQLITE_H_
