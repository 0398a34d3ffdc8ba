#include "store/schema.h"

#include <sys/stat.h>

#include <iterator>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "proto/figures.h"

namespace anvil::store_internal {
namespace {

// Columns of one TimingStats (NULL when the figure was not measured).
#define STORE_STATS_DDL(f)                                                         \
  f "_median_us REAL, " f "_min_us REAL, " f "_p90_us REAL, " f "_spread REAL, " f \
    "_samples INTEGER, "
// Columns of one Timings: the four figures and the first call.
#define STORE_TIMINGS_DDL   \
  STORE_STATS_DDL("device") \
  STORE_STATS_DDL("cold") STORE_STATS_DDL("warm") STORE_STATS_DDL("call") "first_call_us REAL, "

// Migration steps. A released step is never edited: change the schema by
// appending a step (ALTER TABLE, new tables, data fixes).

struct Migration {
  int version;
  const char* sql;
};

constexpr const char kSchemaV1[] =
    "PRAGMA application_id = 1097758316;"  // kApplicationId, "Anvl"
    "CREATE TABLE problems ("
    "  id INTEGER PRIMARY KEY, gpu TEXT NOT NULL, arch TEXT NOT NULL,"
    "  m INTEGER NOT NULL CHECK (m >= 1), n INTEGER NOT NULL CHECK (n >= 1),"
    "  k INTEGER NOT NULL CHECK (k >= 1), layout TEXT NOT NULL, dtype TEXT NOT NULL,"
    "  UNIQUE (gpu, arch, m, n, k, layout, dtype));"
    "CREATE TABLE candidates ("
    "  id TEXT PRIMARY KEY, name TEXT NOT NULL, source TEXT NOT NULL,"
    "  params TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(params)),"
    "  proposer TEXT NOT NULL, family TEXT NOT NULL, layout TEXT NOT NULL,"
    "  flags TEXT NOT NULL, arch TEXT NOT NULL, created_at INTEGER NOT NULL);"
    "CREATE INDEX candidates_family ON candidates (family);"
    "CREATE TABLE candidate_parents ("
    "  candidate_id TEXT NOT NULL REFERENCES candidates (id) ON DELETE CASCADE,"
    "  position INTEGER NOT NULL, parent_id TEXT NOT NULL,"
    "  PRIMARY KEY (candidate_id, position)) WITHOUT ROWID;"
    "CREATE INDEX candidate_parents_parent ON candidate_parents (parent_id);"
    "CREATE TABLE builds ("
    "  id INTEGER PRIMARY KEY,"
    "  candidate_id TEXT NOT NULL REFERENCES candidates (id) ON DELETE CASCADE,"
    "  cache_key TEXT NOT NULL, verdict TEXT NOT NULL, flags TEXT NOT NULL,"
    "  nvcc_version TEXT NOT NULL, arch TEXT NOT NULL,"
    "  usage TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(usage)),"
    "  error TEXT NOT NULL, seconds REAL NOT NULL, cache_hit INTEGER NOT NULL,"
    "  artifact TEXT NOT NULL, created_at INTEGER NOT NULL);"
    "CREATE INDEX builds_candidate ON builds (candidate_id, id);"
    "CREATE INDEX builds_cache_key ON builds (cache_key, id);"
    "CREATE TABLE jobs ("
    "  id TEXT PRIMARY KEY, state TEXT NOT NULL,"
    "  request TEXT NOT NULL CHECK (json_valid(request)),"
    "  created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL,"
    "  error TEXT NOT NULL DEFAULT '');"
    "CREATE INDEX jobs_created ON jobs (created_at);"
    "CREATE TABLE job_problems ("
    "  id INTEGER PRIMARY KEY,"
    "  job_id TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,"
    "  problem_id INTEGER NOT NULL REFERENCES problems (id),"
    "  candidates_tried INTEGER NOT NULL DEFAULT 0,"
    "  best_candidate_id TEXT REFERENCES candidates (id),"
    "  best_us REAL NOT NULL DEFAULT 0, best_baseline_us REAL NOT NULL DEFAULT 0,"
    "  UNIQUE (job_id, problem_id));"
    "CREATE TABLE measurements ("
    "  id INTEGER PRIMARY KEY,"
    "  candidate_id TEXT NOT NULL REFERENCES candidates (id),"
    "  problem_id INTEGER NOT NULL REFERENCES problems (id),"
    "  job_id TEXT REFERENCES jobs (id),"
    "  verdict TEXT NOT NULL, reason TEXT NOT NULL, detail TEXT NOT NULL,"
    "  rel_err REAL NOT NULL, exact_max_abs_err REAL NOT NULL, " STORE_TIMINGS_DDL
    "  sol_us REAL NOT NULL, efficiency REAL NOT NULL,"
    "  graph_capturable INTEGER NOT NULL, kernels_per_call INTEGER NOT NULL,"
    "  kernel_names TEXT NOT NULL CHECK (json_valid(kernel_names)),"
    "  streams_per_call INTEGER NOT NULL, workspace_bytes INTEGER NOT NULL,"
    "  profile TEXT NOT NULL CHECK (json_valid(profile)),"
    "  gpu_uuid TEXT NOT NULL, worker TEXT NOT NULL, measured_at INTEGER NOT NULL,"
    "  seconds REAL NOT NULL, versions TEXT NOT NULL,"
    "  verified INTEGER NOT NULL DEFAULT 0, created_at INTEGER NOT NULL);"
    "CREATE INDEX measurements_history ON measurements (problem_id, measured_at);"
    "CREATE INDEX measurements_job ON measurements (job_id, problem_id, measured_at)"
    "  WHERE job_id IS NOT NULL;"
    "CREATE INDEX measurements_candidate ON measurements (candidate_id);"
    "CREATE INDEX measurements_passed_device ON measurements (problem_id, device_median_us)"
    "  WHERE verdict = 'passed';"
    "CREATE INDEX measurements_passed_cold ON measurements (problem_id, cold_median_us)"
    "  WHERE verdict = 'passed';"
    "CREATE INDEX measurements_passed_warm ON measurements (problem_id, warm_median_us)"
    "  WHERE verdict = 'passed';"
    "CREATE INDEX measurements_passed_call ON measurements (problem_id, call_median_us)"
    "  WHERE verdict = 'passed';"
    "CREATE TABLE baselines ("
    "  id INTEGER PRIMARY KEY,"
    "  measurement_id INTEGER NOT NULL REFERENCES measurements (id) ON DELETE CASCADE,"
    "  name TEXT NOT NULL, " STORE_TIMINGS_DDL
    "  rel_err REAL NOT NULL, kernels TEXT NOT NULL, algo_index INTEGER NOT NULL);"
    "CREATE INDEX baselines_measurement ON baselines (measurement_id);"
    "CREATE TABLE samples ("
    "  measurement_id INTEGER NOT NULL REFERENCES measurements (id) ON DELETE CASCADE,"
    "  baseline_id INTEGER REFERENCES baselines (id) ON DELETE CASCADE,"
    "  device_us BLOB, cold_us BLOB, warm_us BLOB, call_us BLOB);"
    "CREATE INDEX samples_measurement ON samples (measurement_id);"
    "CREATE TABLE rewards ("
    "  id INTEGER PRIMARY KEY,"
    "  measurement_id INTEGER REFERENCES measurements (id),"
    "  candidate_id TEXT NOT NULL REFERENCES candidates (id),"
    "  problem_id INTEGER REFERENCES problems (id), job_id TEXT REFERENCES jobs (id),"
    "  value REAL NOT NULL, kind TEXT NOT NULL, figure TEXT NOT NULL,"
    "  details TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(details)),"
    "  created_at INTEGER NOT NULL);"
    "CREATE INDEX rewards_job ON rewards (job_id, id);"
    "CREATE INDEX rewards_measurement ON rewards (measurement_id);"
    "CREATE TABLE workers ("
    "  id TEXT PRIMARY KEY, hostname TEXT NOT NULL,"
    "  gpus TEXT NOT NULL CHECK (json_valid(gpus)), build_jobs INTEGER NOT NULL,"
    "  versions TEXT NOT NULL, registered_at INTEGER NOT NULL,"
    "  last_heartbeat_at INTEGER NOT NULL, state TEXT NOT NULL);"
    "CREATE TABLE llm_exchanges ("
    "  id INTEGER PRIMARY KEY, job_id TEXT REFERENCES jobs (id),"
    "  problem_id INTEGER REFERENCES problems (id), candidate_id TEXT,"
    "  model TEXT NOT NULL, endpoint TEXT NOT NULL, prompt TEXT NOT NULL,"
    "  response TEXT NOT NULL, prompt_tokens INTEGER NOT NULL,"
    "  completion_tokens INTEGER NOT NULL, latency_ms REAL NOT NULL,"
    "  error TEXT NOT NULL, created_at INTEGER NOT NULL);"
    "CREATE INDEX llm_exchanges_job ON llm_exchanges (job_id, id);"
    "CREATE INDEX llm_exchanges_candidate ON llm_exchanges (candidate_id);"
    "CREATE TABLE lt_algo_cache ("
    "  problem_id INTEGER NOT NULL REFERENCES problems (id),"
    "  cublas_version TEXT NOT NULL, algo BLOB NOT NULL, measured_at INTEGER NOT NULL,"
    "  PRIMARY KEY (problem_id, cublas_version)) WITHOUT ROWID;";

// The cached cuBLASLt choices of version 1 were tuned with each algorithm's
// first (lazily loading) launch inside its timing, which made the choice close
// to random; forget them, so each problem is tuned again by device time.
constexpr const char kSchemaV2[] = "DELETE FROM lt_algo_cache;";

// Graph-replay timing in two named cache regimes (graph_hot, graph_cold) for
// measurements and baselines, their samples, the ranking indexes, and why a
// row has no graph figure: rows measured before this step say so. The
// cuBLASLt cache keys each choice by the figure it was tuned by; the choices
// kept were tuned by device time.
#define STORE_ADD_STATS(t, f)                                              \
  "ALTER TABLE " t " ADD COLUMN " f "_median_us REAL;"                     \
  "ALTER TABLE " t " ADD COLUMN " f "_min_us REAL;"                        \
  "ALTER TABLE " t " ADD COLUMN " f "_p90_us REAL;"                        \
  "ALTER TABLE " t " ADD COLUMN " f "_spread REAL;"                        \
  "ALTER TABLE " t " ADD COLUMN " f "_samples INTEGER;"
#define STORE_ADD_GRAPH(t)                                                  \
  STORE_ADD_STATS(t, "graph_hot") STORE_ADD_STATS(t, "graph_cold")         \
  "ALTER TABLE " t " ADD COLUMN graph_calls_hot INTEGER;"                  \
  "ALTER TABLE " t " ADD COLUMN graph_calls_cold INTEGER;"                 \
  "ALTER TABLE " t " ADD COLUMN graph_cold_sets INTEGER;"
constexpr const char kSchemaV3[] =
    STORE_ADD_GRAPH("measurements") STORE_ADD_GRAPH("baselines")
    "ALTER TABLE measurements ADD COLUMN graph_note TEXT NOT NULL DEFAULT "
    "  'measured before graph-replay timing: no graph figures';"
    "ALTER TABLE samples ADD COLUMN graph_hot_us BLOB;"
    "ALTER TABLE samples ADD COLUMN graph_cold_us BLOB;"
    "CREATE INDEX measurements_passed_graph_hot ON measurements (problem_id, graph_hot_median_us)"
    "  WHERE verdict = 'passed';"
    "CREATE INDEX measurements_passed_graph_cold ON measurements (problem_id, graph_cold_median_us)"
    "  WHERE verdict = 'passed';"
    "CREATE TABLE lt_algo_cache_by_figure ("
    "  problem_id INTEGER NOT NULL REFERENCES problems (id),"
    "  cublas_version TEXT NOT NULL, figure TEXT NOT NULL, algo BLOB NOT NULL,"
    "  measured_at INTEGER NOT NULL,"
    "  PRIMARY KEY (problem_id, cublas_version, figure)) WITHOUT ROWID;"
    "INSERT INTO lt_algo_cache_by_figure SELECT problem_id, cublas_version, 'device', algo, "
    "  measured_at FROM lt_algo_cache;"
    "DROP TABLE lt_algo_cache;"
    "ALTER TABLE lt_algo_cache_by_figure RENAME TO lt_algo_cache;";
#undef STORE_ADD_GRAPH
#undef STORE_ADD_STATS
// Jobs owned by the coordinator: a client's request id (idempotent
// OptimizeKernel: the id and the SHA-256 of the request body), the wall and
// GPU seconds spent over all of a job's runs (a resumed job spends only what
// is left), and each job problem's status ("" while searched, else why it
// stopped: "candidates", "plateau", "target").
constexpr const char kSchemaV4[] =
    "ALTER TABLE jobs ADD COLUMN request_id TEXT;"
    "ALTER TABLE jobs ADD COLUMN request_sha256 TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE jobs ADD COLUMN wall_seconds REAL NOT NULL DEFAULT 0;"
    "ALTER TABLE jobs ADD COLUMN gpu_seconds REAL NOT NULL DEFAULT 0;"
    "CREATE UNIQUE INDEX jobs_request_id ON jobs (request_id) WHERE request_id IS NOT NULL;"
    "ALTER TABLE job_problems ADD COLUMN status TEXT NOT NULL DEFAULT '';";

// The fleet's task queue and leases (store/SCHEMA.md, "Tasks"): one row per
// build or measure task, leased to one worker slot at a time; attempt counts
// the leases, so a result is keyed by task id and attempt and a late result
// of an expired lease is told apart. Workers gain a quarantine reason, their
// consecutive infrastructure failures and build and measure throughput.
constexpr const char kSchemaV5[] =
    "CREATE TABLE tasks ("
    "  id TEXT PRIMARY KEY,"
    "  kind TEXT NOT NULL CHECK (kind IN ('build', 'measure')),"
    "  job_id TEXT, candidate_id TEXT NOT NULL, gpu TEXT NOT NULL DEFAULT '',"
    "  payload BLOB NOT NULL,"
    "  state TEXT NOT NULL CHECK (state IN ('queued', 'leased', 'done', 'cancelled')),"
    "  attempt INTEGER NOT NULL DEFAULT 0, expired_leases INTEGER NOT NULL DEFAULT 0,"
    "  lease_owner TEXT, lease_slot INTEGER, lease_expires_at INTEGER,"
    "  result BLOB, result_attempt INTEGER, result_worker TEXT,"
    "  created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL);"
    "CREATE INDEX tasks_queue ON tasks (state, kind, gpu, created_at);"
    "CREATE INDEX tasks_lease_expiry ON tasks (lease_expires_at) WHERE state = 'leased';"
    "CREATE INDEX tasks_job ON tasks (job_id);"
    "ALTER TABLE workers ADD COLUMN quarantine_reason TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE workers ADD COLUMN infra_failures INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE workers ADD COLUMN builds INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE workers ADD COLUMN build_seconds REAL NOT NULL DEFAULT 0;"
    "ALTER TABLE workers ADD COLUMN measures INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE workers ADD COLUMN measure_seconds REAL NOT NULL DEFAULT 0;";
// The LLM proposer's training data: what each exchange sent (the system
// prompt and the whole conversation, the templates' version, the context
// recipe), what it cost (dollars, HTTP requests), and one row per sample (a
// choice the model returned) with what became of it and, once its candidate
// was measured, its reward and its group-normalised advantage.
constexpr const char kSchemaV6[] =
    "ALTER TABLE llm_exchanges ADD COLUMN system_prompt TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE llm_exchanges ADD COLUMN messages TEXT NOT NULL DEFAULT '[]'"
    "  CHECK (json_valid(messages));"
    "ALTER TABLE llm_exchanges ADD COLUMN prompt_version TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE llm_exchanges ADD COLUMN recipe TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE llm_exchanges ADD COLUMN cost_usd REAL NOT NULL DEFAULT 0;"
    "ALTER TABLE llm_exchanges ADD COLUMN http_requests INTEGER NOT NULL DEFAULT 0;"
    "CREATE TABLE llm_samples ("
    "  id INTEGER PRIMARY KEY,"
    "  exchange_id INTEGER NOT NULL REFERENCES llm_exchanges (id) ON DELETE CASCADE,"
    "  sample_index INTEGER NOT NULL, response TEXT NOT NULL, candidate_id TEXT,"
    "  status TEXT NOT NULL, reason TEXT NOT NULL DEFAULT '',"
    "  reward REAL, advantage REAL, reward_kind TEXT NOT NULL DEFAULT '',"
    "  UNIQUE (exchange_id, sample_index));";

// The graph figures of the runner before it used one stream, set aside. That
// runner's context carried work on a second stream after its ceilings'
// copies, which made every launch in its CUDA graphs about 0.17 us slower:
// kernels with programmatic dependent launch hid it, the vendor's did not, so
// short shapes' graph speedups read 4-12% high
// (bench/results/2026-11-27-launch-gap-h100.md). The figures move to
// graph_figures_before_7 and graph_samples_before_7 (nothing is lost); the
// rows keep every other figure and say why they have no graph figure, so a
// search measures them again; graph-regime cuBLASLt choices are tuned again.
#define STORE_GRAPH_COLUMNS                                                   \
  " graph_hot_median_us, graph_hot_min_us, graph_hot_p90_us, graph_hot_spread," \
  " graph_hot_samples, graph_cold_median_us, graph_cold_min_us, graph_cold_p90_us," \
  " graph_cold_spread, graph_cold_samples, graph_calls_hot, graph_calls_cold, graph_cold_sets"
#define STORE_NULL_GRAPH                                                         \
  " SET graph_hot_median_us = NULL, graph_hot_min_us = NULL, graph_hot_p90_us = NULL," \
  " graph_hot_spread = NULL, graph_hot_samples = NULL, graph_cold_median_us = NULL,"     \
  " graph_cold_min_us = NULL, graph_cold_p90_us = NULL, graph_cold_spread = NULL,"       \
  " graph_cold_samples = NULL, graph_calls_hot = NULL, graph_calls_cold = NULL,"         \
  " graph_cold_sets = NULL"
#define STORE_HAS_GRAPH " WHERE graph_hot_median_us IS NOT NULL OR graph_cold_median_us IS NOT NULL"
constexpr const char kSchemaV7[] =
    "CREATE TABLE graph_figures_before_7 AS"
    "  SELECT 'measurement' AS source, id," STORE_GRAPH_COLUMNS " FROM measurements" STORE_HAS_GRAPH
    "  UNION ALL SELECT 'baseline', id," STORE_GRAPH_COLUMNS " FROM baselines" STORE_HAS_GRAPH ";"
    "CREATE TABLE graph_samples_before_7 AS"
    "  SELECT measurement_id, baseline_id, graph_hot_us, graph_cold_us FROM samples"
    "  WHERE graph_hot_us IS NOT NULL OR graph_cold_us IS NOT NULL;"
    "UPDATE measurements SET graph_note = '" ANVIL_GRAPH_FIGURES_WITHDRAWN "'" STORE_HAS_GRAPH ";"
    "UPDATE measurements" STORE_NULL_GRAPH STORE_HAS_GRAPH ";"
    "UPDATE baselines" STORE_NULL_GRAPH STORE_HAS_GRAPH ";"
    "UPDATE samples SET graph_hot_us = NULL, graph_cold_us = NULL"
    "  WHERE graph_hot_us IS NOT NULL OR graph_cold_us IS NOT NULL;"
    "DELETE FROM lt_algo_cache WHERE figure IN ('graph-hot', 'graph-cold');";
#undef STORE_HAS_GRAPH
#undef STORE_NULL_GRAPH
#undef STORE_GRAPH_COLUMNS

// Tasks belong to jobs, workers have identities (server/fleet/FLEET.md).
// tasks.parked: queued by a run of its job that has since stopped; leased
// only once a later run of the job takes it over (nothing measured twice).
// tasks.collected: its result was handed to the coordinator. avoid_gpus:
// GPU UUIDs (comma-separated) a re-check should not run on while another GPU
// of its model is live; lease_gpu: the UUID of the slot holding the lease.
// workers.credential_sha256: the SHA-256 of the credential the server issued
// at registration (every later call must carry it); build_failures: the
// streak of its build slots' failures (infra_failures: its GPU slots'), so a
// clean build does not excuse a GPU that keeps failing. worker_evidence: what
// the server held against a worker (an infrastructure failure of its own
// lease, a malformed report, figures that disagree with another worker's on
// the same candidate): what flags and quarantines it; `settled` once an
// operator lifted the quarantine (kept, no longer counted).
constexpr const char kSchemaV8[] =
    "ALTER TABLE tasks ADD COLUMN parked INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE tasks ADD COLUMN collected INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE tasks ADD COLUMN avoid_gpus TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE tasks ADD COLUMN lease_gpu TEXT;"
    "ALTER TABLE workers ADD COLUMN credential_sha256 TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE workers ADD COLUMN build_failures INTEGER NOT NULL DEFAULT 0;"
    "CREATE TABLE worker_evidence ("
    "  id INTEGER PRIMARY KEY, worker_id TEXT NOT NULL,"
    "  kind TEXT NOT NULL CHECK (kind IN ('infrastructure', 'malformed_report', 'disagreement')),"
    "  task_id TEXT NOT NULL DEFAULT '', candidate_id TEXT NOT NULL DEFAULT '',"
    "  problem TEXT NOT NULL DEFAULT '', other_worker TEXT NOT NULL DEFAULT '',"
    "  detail TEXT NOT NULL, at INTEGER NOT NULL, settled INTEGER NOT NULL DEFAULT 0);"
    "CREATE INDEX worker_evidence_worker ON worker_evidence (worker_id, at);";

// measurements.fidelity: 'full' (every figure, baselines beside the
// candidate; every row from before this step) or 'screen' (the job's figure
// only, fewer rounds, baselines timed once per runner process and problem).
// llm_samples.reward_fidelity: the fidelity of the measurements a sample's
// reward came from ('' when none: a build failure, a refusal).
constexpr const char kSchemaV9[] =
    "ALTER TABLE measurements ADD COLUMN fidelity TEXT NOT NULL DEFAULT 'full'"
    "  CHECK (fidelity IN ('full', 'screen'));"
    "ALTER TABLE llm_samples ADD COLUMN reward_fidelity TEXT NOT NULL DEFAULT '';";

constexpr Migration kMigrations[] = {
    {1, kSchemaV1},
    {2, kSchemaV2},
    {3, kSchemaV3},
    {4, kSchemaV4},
    {5, kSchemaV5},
    {6, kSchemaV6},
    {7, kSchemaV7},
    {8, kSchemaV8},
    {9, kSchemaV9},
};

struct Header {
  int64_t application_id = 0;
  int64_t user_version = 0;
  int64_t user_tables = 0;
};

absl::Status CheckPath(const std::string& path, const StoreOptions& options) {
  if (path.empty() || path == ":memory:" || path.front() == ':') {
    return absl::InvalidArgumentError("the store needs a file path");
  }
  struct stat st;
  bool exists = stat(path.c_str(), &st) == 0;
  if (!exists && (options.read_only || !options.create_if_missing)) {
    return absl::NotFoundError(absl::StrCat("no Anvil database at ", path));
  }
  if (exists && S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(path, " is a directory, not a database"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Header> ReadHeader(Db& db) {
  Header header;
  STORE_ASSIGN_OR_RETURN(header.application_id, db.QueryInt("PRAGMA application_id"));
  STORE_ASSIGN_OR_RETURN(header.user_version, db.QueryInt("PRAGMA user_version"));
  STORE_ASSIGN_OR_RETURN(
      header.user_tables,
      db.QueryInt("SELECT count(*) FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%'"));
  return header;
}

absl::Status NewerSchemaError(int64_t version) {
  return absl::FailedPreconditionError(absl::StrCat("database schema version ", version,
                                                    " is newer than this Anvil (knows up to ",
                                                    LatestSchemaVersion(), "); upgrade Anvil"));
}

absl::Status CheckIdentity(const std::string& path, const Header& h, bool read_only) {
  if (h.application_id != 0 && h.application_id != kApplicationId) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " is an SQLite database of another application (application_id ",
                     h.application_id, "), not an Anvil database"));
  }
  if (h.user_version > LatestSchemaVersion()) return NewerSchemaError(h.user_version);
  if (h.user_version == 0 && h.user_tables > 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(path,
                     " is an SQLite database without an Anvil schema (it has tables but "
                     "user_version 0); not an Anvil database"));
  }
  if (read_only && h.user_version == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(path,
                     " has no Anvil schema (user_version 0); it is empty or not an "
                     "Anvil database"));
  }
  if (read_only && h.user_version < LatestSchemaVersion()) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, " has schema version ", h.user_version, " but this Anvil reads version ",
        LatestSchemaVersion(), "; run `anvil --db ", path, " doctor --migrate` (or start the server on it) to migrate"));
  }
  return absl::OkStatus();
}

absl::Status QuickCheck(Db& db, const std::string& path) {
  STORE_ASSIGN_OR_RETURN(std::string result, db.QueryText("PRAGMA quick_check"));
  if (result == "ok") return absl::OkStatus();
  return absl::DataLossError(absl::StrCat(path, " is corrupt (PRAGMA quick_check: ", result,
                                          "); restore it from a backup"));
}

absl::Status SetWritePragmas(Db& db, const StoreOptions& options) {
  STORE_ASSIGN_OR_RETURN(std::string mode, db.QueryText("PRAGMA journal_mode = WAL"));
  if (mode != "wal") {
    return absl::FailedPreconditionError(absl::StrCat("cannot use WAL journal on ", db.path(),
                                                      " (got '", mode,
                                                      "'); is it on a network filesystem?"));
  }
  STORE_RETURN_IF_ERROR(db.Exec("PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON"));
  if (options.max_page_count > 0) {
    STORE_RETURN_IF_ERROR(
        db.QueryInt(absl::StrCat("PRAGMA max_page_count = ", options.max_page_count)).status());
  }
  return absl::OkStatus();
}

// Applies every step newer than the stored version, one transaction each.
// The version is re-read inside the transaction: another process may have
// migrated meanwhile.
absl::StatusOr<int> Migrate(Db& db, int up_to = std::numeric_limits<int>::max()) {
  int version = 0;
  for (const Migration& step : kMigrations) {
    if (step.version > up_to) break;
    Transaction txn(db);
    STORE_RETURN_IF_ERROR(txn.Begin());
    STORE_ASSIGN_OR_RETURN(int64_t current, db.QueryInt("PRAGMA user_version"));
    if (current > LatestSchemaVersion()) return NewerSchemaError(current);
    version = static_cast<int>(current);
    if (step.version <= current) continue;
    absl::Status status = db.Exec(step.sql);
    if (status.ok()) status = db.Exec(absl::StrCat("PRAGMA user_version = ", step.version));
    if (status.ok()) status = txn.Commit();
    if (!status.ok()) {
      return absl::Status(status.code(),
                          absl::StrCat("migrating ", db.path(), " to schema version ", step.version,
                                       ": ", status.message()));
    }
    version = step.version;
  }
  return version;
}

absl::Status Annotate(const absl::Status& status, const std::string& path) {
  if (absl::IsDataLoss(status)) {
    return absl::DataLossError(
        absl::StrCat(path, " is not an Anvil database or is corrupt (", status.message(), ")"));
  }
  return status;
}

}  // namespace

int LatestSchemaVersion() { return kMigrations[std::size(kMigrations) - 1].version; }

absl::StatusOr<OpenedDb> OpenDatabase(const std::string& path, const StoreOptions& options) {
  STORE_RETURN_IF_ERROR(CheckPath(path, options));
  int flags = options.read_only
                  ? SQLITE_OPEN_READONLY
                  : SQLITE_OPEN_READWRITE | (options.create_if_missing ? SQLITE_OPEN_CREATE : 0);
  STORE_ASSIGN_OR_RETURN(std::unique_ptr<Db> db, Db::Open(path, flags));
  sqlite3_busy_timeout(db->raw(), options.busy_timeout_ms);
  absl::StatusOr<Header> header = ReadHeader(*db);
  if (!header.ok()) return Annotate(header.status(), path);
  STORE_RETURN_IF_ERROR(CheckIdentity(path, *header, options.read_only));
  if (options.quick_check) STORE_RETURN_IF_ERROR(QuickCheck(*db, path));
  OpenedDb opened;
  if (options.read_only) {
    STORE_RETURN_IF_ERROR(db->Exec("PRAGMA query_only = 1"));
    opened.schema_version = static_cast<int>(header->user_version);
  } else {
    STORE_RETURN_IF_ERROR(SetWritePragmas(*db, options));
    STORE_ASSIGN_OR_RETURN(opened.schema_version, Migrate(*db));
  }
  opened.db = std::move(db);
  return opened;
}

absl::Status CreateAtSchemaVersion(const std::string& path, int version) {
  STORE_ASSIGN_OR_RETURN(std::unique_ptr<Db> db,
                         Db::Open(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE));
  STORE_RETURN_IF_ERROR(SetWritePragmas(*db, StoreOptions()));
  return Migrate(*db, version).status();
}

}  // namespace anvil::store_internal
