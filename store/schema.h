// Internal to store/: opening a database file safely and bringing its schema
// up to date. The schema is a list of migration steps keyed by PRAGMA
// user_version; each step runs in its own transaction. Policy: SCHEMA.md.
//
// Thread-safety: functions here take a Db the caller uses exclusively.
#ifndef ANVIL_STORE_SCHEMA_H_
#define ANVIL_STORE_SCHEMA_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "store/sqlite.h"
#include "store/store.h"

namespace anvil::store_internal {

// PRAGMA application_id of every Anvil database: "Anvl" in ASCII.
inline constexpr int64_t kApplicationId = 0x416e766c;

// The newest schema version this code creates and reads.
int LatestSchemaVersion();

struct OpenedDb {
  std::unique_ptr<Db> db;
  int schema_version = 0;
};

// Opens path: refuses missing files (unless creating), files that are not
// SQLite or not Anvil's, corrupt files (quick_check), and schemas newer than
// this code; sets the pragmas (WAL, synchronous=NORMAL, foreign keys, busy
// timeout) and applies pending migrations unless read-only.
absl::StatusOr<OpenedDb> OpenDatabase(const std::string& path, const StoreOptions& options);

// For migration tests: creates a database at `path` with the schema of
// `version` (the steps up to it), as an older Anvil would have left it.
absl::Status CreateAtSchemaVersion(const std::string& path, int version);

}  // namespace anvil::store_internal

#endif  // ANVIL_STORE_SCHEMA_H_
