// Store: candidates (with their parents) and builds.
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

constexpr char kBuildColumns[] =
    "candidate_id, cache_key, verdict, flags, nvcc_version, arch, usage, error, seconds, "
    "cache_hit, artifact";

absl::Status InsertCandidate(Db& db, const v1::Candidate& c, int64_t now) {
  STORE_ASSIGN_OR_RETURN(
      Stmt stmt,
      db.Prepare("INSERT INTO candidates (id, name, source, params, proposer, family, layout, "
                 "flags, arch, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
  stmt.BindText(c.id()).BindText(c.name()).BindText(c.source()).BindText(StringMapJson(c.params()));
  stmt.BindText(c.proposer()).BindText(c.family()).BindText(LayoutText(c.layout()));
  stmt.BindText(c.flags()).BindText(c.arch()).BindInt(now);
  STORE_RETURN_IF_ERROR(stmt.Run());
  for (int i = 0; i < c.parent_ids_size(); ++i) {
    STORE_ASSIGN_OR_RETURN(
        Stmt parent, db.Prepare("INSERT INTO candidate_parents (candidate_id, position, parent_id) "
                                "VALUES (?, ?, ?)"));
    parent.BindText(c.id()).BindInt(i).BindText(c.parent_ids(i));
    STORE_RETURN_IF_ERROR(parent.Run());
  }
  return absl::OkStatus();
}

absl::Status ReadBuildRow(const Stmt& s, v1::Build* b) {
  b->set_candidate_id(s.Text(0));
  b->set_cache_key(s.Text(1));
  b->set_verdict(VerdictFromText(s.Text(2)));
  b->set_flags(s.Text(3));
  b->set_nvcc_version(s.Text(4));
  b->set_arch(s.Text(5));
  STORE_RETURN_IF_ERROR(ParseMessageListJson(s.Text(6), [b] { return b->add_usage(); }));
  b->set_error(s.Text(7));
  b->set_seconds(s.Real(8));
  b->set_cache_hit(s.Int(9) != 0);
  b->set_artifact(s.Text(10));
  return absl::OkStatus();
}

absl::StatusOr<std::optional<v1::Build>> QueryOneBuild(Db& db, const std::string& sql,
                                                       const std::string& key) {
  STORE_ASSIGN_OR_RETURN(Stmt stmt, db.Prepare(sql));
  stmt.BindText(key);
  STORE_ASSIGN_OR_RETURN(bool row, stmt.Step());
  if (!row) return std::optional<v1::Build>();
  v1::Build build;
  STORE_RETURN_IF_ERROR(ReadBuildRow(stmt, &build));
  return std::optional<v1::Build>(std::move(build));
}

absl::StatusOr<std::optional<std::string>> StoredSource(Db& db, const std::string& id) {
  STORE_ASSIGN_OR_RETURN(Stmt stmt, db.Prepare("SELECT source FROM candidates WHERE id = ?"));
  stmt.BindText(id);
  STORE_ASSIGN_OR_RETURN(bool found, stmt.Step());
  if (!found) return std::optional<std::string>();
  return std::optional<std::string>(stmt.Text(0));
}

}  // namespace

absl::StatusOr<bool> CandidateExists(Db& db, const std::string& id) {
  STORE_ASSIGN_OR_RETURN(Stmt stmt, db.Prepare("SELECT 1 FROM candidates WHERE id = ?"));
  stmt.BindText(id);
  return stmt.Step();
}

absl::StatusOr<std::optional<v1::Candidate>> LoadCandidate(Db& db, const std::string& id) {
  STORE_ASSIGN_OR_RETURN(Stmt s, db.Prepare("SELECT id, name, source, params, proposer, family, "
                                            "layout, flags, arch FROM candidates WHERE id = ?"));
  s.BindText(id);
  STORE_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return std::optional<v1::Candidate>();
  v1::Candidate c;
  c.set_id(s.Text(0));
  c.set_name(s.Text(1));
  c.set_source(s.Text(2));
  STORE_RETURN_IF_ERROR(ParseStringMapJson(s.Text(3), c.mutable_params()));
  c.set_proposer(s.Text(4));
  c.set_family(s.Text(5));
  c.set_layout(LayoutFromText(s.Text(6)));
  c.set_flags(s.Text(7));
  c.set_arch(s.Text(8));
  STORE_ASSIGN_OR_RETURN(Stmt parents, db.Prepare("SELECT parent_id FROM candidate_parents WHERE "
                                                  "candidate_id = ? ORDER BY position"));
  parents.BindText(id);
  while (true) {
    STORE_ASSIGN_OR_RETURN(bool more, parents.Step());
    if (!more) break;
    c.add_parent_ids(parents.Text(0));
  }
  return std::optional<v1::Candidate>(std::move(c));
}

absl::StatusOr<std::optional<v1::Build>> LoadLatestBuild(Db& db, const std::string& candidate_id,
                                                         bool prefer_passed) {
  static const std::string kLatest = absl::StrCat(
      "SELECT ", kBuildColumns, " FROM builds WHERE candidate_id = ? ORDER BY id DESC LIMIT 1");
  static const std::string kPassed =
      absl::StrCat("SELECT ", kBuildColumns,
                   " FROM builds WHERE candidate_id = ? ORDER BY verdict = 'passed' DESC, id DESC "
                   "LIMIT 1");
  return QueryOneBuild(db, prefer_passed ? kPassed : kLatest, candidate_id);
}

}  // namespace store_internal

absl::Status Store::PutCandidate(const v1::Candidate& candidate) {
  if (candidate.id().empty()) return absl::InvalidArgumentError("candidate has no id");
  absl::MutexLock lock(&mu_);
  Transaction txn(*db_);
  STORE_RETURN_IF_ERROR(txn.Begin());
  STORE_ASSIGN_OR_RETURN(std::optional<std::string> source,
                         store_internal::StoredSource(*db_, candidate.id()));
  if (source.has_value()) {
    if (*source == candidate.source()) return absl::OkStatus();  // idempotent
    return absl::AlreadyExistsError(
        absl::StrCat("candidate ", candidate.id(), " is already stored with a different source"));
  }
  STORE_RETURN_IF_ERROR(WithContext(store_internal::InsertCandidate(*db_, candidate, Now()),
                                    absl::StrCat("storing candidate ", candidate.id())));
  return txn.Commit();
}

absl::StatusOr<v1::Candidate> Store::GetCandidate(const std::string& id) {
  absl::MutexLock lock(&mu_);
  STORE_ASSIGN_OR_RETURN(std::optional<v1::Candidate> candidate,
                         store_internal::LoadCandidate(*db_, id));
  if (!candidate.has_value()) return absl::NotFoundError(absl::StrCat("no candidate ", id));
  return *std::move(candidate);
}

absl::StatusOr<int64_t> Store::PutBuild(const v1::Build& b) {
  absl::MutexLock lock(&mu_);
  STORE_ASSIGN_OR_RETURN(bool known, store_internal::CandidateExists(*db_, b.candidate_id()));
  if (!known) {
    return absl::InvalidArgumentError(
        absl::StrCat("build for candidate '", b.candidate_id(), "': candidate is not stored"));
  }
  STORE_ASSIGN_OR_RETURN(std::string usage, store_internal::MessageListJson(b.usage()));
  static const std::string kSql =
      absl::StrCat("INSERT INTO builds (", store_internal::kBuildColumns, ", created_at) VALUES (",
                   store_internal::Placeholders(12), ")");
  STORE_ASSIGN_OR_RETURN(Stmt stmt, db_->Prepare(kSql));
  stmt.BindText(b.candidate_id()).BindText(b.cache_key());
  stmt.BindText(store_internal::VerdictText(b.verdict())).BindText(b.flags());
  stmt.BindText(b.nvcc_version()).BindText(b.arch()).BindText(usage).BindText(b.error());
  stmt.BindReal(b.seconds()).BindInt(b.cache_hit() ? 1 : 0).BindText(b.artifact()).BindInt(Now());
  STORE_RETURN_IF_ERROR(WithContext(stmt.Run(), "storing build"));
  return db_->LastInsertId();
}

absl::StatusOr<std::optional<v1::Build>> Store::LatestBuild(const std::string& candidate_id) {
  absl::MutexLock lock(&mu_);
  return store_internal::LoadLatestBuild(*db_, candidate_id, /*prefer_passed=*/false);
}

absl::StatusOr<std::optional<v1::Build>> Store::FindBuildByCacheKey(const std::string& cache_key) {
  absl::MutexLock lock(&mu_);
  static const std::string kSql =
      absl::StrCat("SELECT ", store_internal::kBuildColumns,
                   " FROM builds WHERE cache_key = ? ORDER BY id DESC LIMIT 1");
  return store_internal::QueryOneBuild(*db_, kSql, cache_key);
}

absl::StatusOr<std::vector<StoredBuild>> Store::ListBuilds(int64_t since_unix_ms,
                                                            int64_t until_unix_ms, int limit) {
  absl::MutexLock lock(&mu_);
  static const std::string kSql = absl::StrCat(
      "SELECT ", store_internal::kBuildColumns,
      ", id, created_at FROM builds WHERE created_at >= ?1 AND (?2 <= 0 OR created_at <= ?2) "
      "ORDER BY created_at, id LIMIT ?3");
  STORE_ASSIGN_OR_RETURN(Stmt stmt, db_->Prepare(kSql));
  stmt.BindInt(since_unix_ms).BindInt(until_unix_ms).BindInt(limit > 0 ? limit : -1);
  std::vector<StoredBuild> builds;
  while (true) {
    STORE_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) return builds;
    StoredBuild& b = builds.emplace_back();
    STORE_RETURN_IF_ERROR(store_internal::ReadBuildRow(stmt, &b.build));
    b.build.clear_usage();
    b.id = stmt.Int(11);
    b.created_unix_ms = stmt.Int(12);
  }
}

}  // namespace anvil
