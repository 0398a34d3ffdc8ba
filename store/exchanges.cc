// Store: rewards, LLM exchanges (training-data export) and the cuBLASLt
// autotuning cache.
#include <map>

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

// Binds the problem's row id, or NULL when there is no problem.
absl::Status BindOptionalProblem(Db& db, const std::optional<v1::Problem>& problem, Stmt& s) {
  if (!problem.has_value()) {
    s.BindNull();
    return absl::OkStatus();
  }
  STORE_ASSIGN_OR_RETURN(int64_t id, UpsertProblemRow(db, *problem));
  s.BindInt(id);
  return absl::OkStatus();
}

void BindOptionalReal(Stmt& s, const std::optional<double>& v) {
  if (v.has_value()) {
    s.BindReal(*v);
  } else {
    s.BindNull();
  }
}

std::optional<double> OptionalReal(const Stmt& s, int col) {
  if (s.IsNull(col)) return std::nullopt;
  return s.Real(col);
}

// Reads the 7 problem columns of a LEFT JOIN: nullopt when they are NULL.
std::optional<v1::Problem> ReadOptionalProblem(const Stmt& s, int col) {
  if (s.IsNull(col)) return std::nullopt;
  v1::Problem problem;
  ReadProblem(s, col, &problem);
  return problem;
}

}  // namespace
}  // namespace store_internal

absl::StatusOr<int64_t> Store::PutReward(const Reward& r) {
  if (r.candidate_id.empty() || r.kind.empty()) {
    return absl::InvalidArgumentError("a reward needs a candidate_id and a kind");
  }
  absl::MutexLock lock(&mu_);
  Transaction txn(*db_);
  STORE_RETURN_IF_ERROR(txn.Begin());
  {
    STORE_ASSIGN_OR_RETURN(
        Stmt s, db_->Prepare("INSERT INTO rewards (measurement_id, candidate_id, problem_id, "
                             "job_id, value, kind, figure, details, created_at) "
                             "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"));
    if (r.measurement_id != 0) {
      s.BindInt(r.measurement_id);
    } else {
      s.BindNull();
    }
    s.BindText(r.candidate_id);
    STORE_RETURN_IF_ERROR(store_internal::BindOptionalProblem(*db_, r.problem, s));
    s.BindTextOrNull(r.job_id).BindReal(r.value).BindText(r.kind).BindText(r.figure);
    s.BindText(r.details_json.empty() ? "{}" : r.details_json);
    s.BindInt(r.created_unix_ms != 0 ? r.created_unix_ms : Now());
    STORE_RETURN_IF_ERROR(WithContext(s.Run(), "storing reward"));
  }
  int64_t id = db_->LastInsertId();
  STORE_RETURN_IF_ERROR(txn.Commit());
  return id;
}

absl::StatusOr<std::vector<Reward>> Store::ListRewards(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  static const std::string kSql = absl::StrCat(
      "SELECT r.id, r.measurement_id, r.candidate_id, r.job_id, r.value, r.kind, r.figure, "
      "r.details, r.created_at, ",
      store_internal::ProblemColumns("p."),
      " FROM rewards r LEFT JOIN problems p ON p.id = r.problem_id WHERE r.job_id = ? "
      "ORDER BY r.id");
  STORE_ASSIGN_OR_RETURN(Stmt s, db_->Prepare(kSql));
  s.BindText(job_id);
  std::vector<Reward> rewards;
  while (true) {
    STORE_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return rewards;
    Reward& r = rewards.emplace_back();
    r.id = s.Int(0);
    r.measurement_id = s.Int(1);  // NULL reads as 0
    r.candidate_id = s.Text(2);
    r.job_id = s.Text(3);
    r.value = s.Real(4);
    r.kind = s.Text(5);
    r.figure = s.Text(6);
    r.details_json = s.Text(7);
    r.created_unix_ms = s.Int(8);
    r.problem = store_internal::ReadOptionalProblem(s, 9);
  }
}

absl::StatusOr<int64_t> Store::PutLlmExchange(const LlmExchange& e) {
  absl::MutexLock lock(&mu_);
  Transaction txn(*db_);
  STORE_RETURN_IF_ERROR(txn.Begin());
  {
    STORE_ASSIGN_OR_RETURN(
        Stmt s, db_->Prepare("INSERT INTO llm_exchanges (job_id, problem_id, candidate_id, model, "
                             "endpoint, prompt, response, prompt_tokens, completion_tokens, "
                             "latency_ms, error, created_at, system_prompt, messages, "
                             "prompt_version, recipe, cost_usd, http_requests) "
                             "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
    s.BindTextOrNull(e.job_id);
    STORE_RETURN_IF_ERROR(store_internal::BindOptionalProblem(*db_, e.problem, s));
    s.BindTextOrNull(e.candidate_id).BindText(e.model).BindText(e.endpoint).BindText(e.prompt);
    s.BindText(e.response).BindInt(e.prompt_tokens).BindInt(e.completion_tokens);
    s.BindReal(e.latency_ms).BindText(e.error);
    s.BindInt(e.created_unix_ms != 0 ? e.created_unix_ms : Now());
    s.BindText(e.system_prompt).BindText(e.messages_json.empty() ? "[]" : e.messages_json);
    s.BindText(e.prompt_version).BindText(e.recipe).BindReal(e.cost_usd).BindInt(e.http_requests);
    STORE_RETURN_IF_ERROR(WithContext(s.Run(), "storing LLM exchange"));
  }
  int64_t id = db_->LastInsertId();
  for (const LlmSample& sample : e.samples) {
    STORE_ASSIGN_OR_RETURN(
        Stmt s, db_->Prepare("INSERT INTO llm_samples (exchange_id, sample_index, response, "
                             "candidate_id, status, reason, reward, advantage, reward_kind, "
                             "reward_fidelity) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
    s.BindInt(id).BindInt(sample.sample_index).BindText(sample.response);
    s.BindTextOrNull(sample.candidate_id).BindText(sample.status).BindText(sample.reason);
    store_internal::BindOptionalReal(s, sample.reward);
    store_internal::BindOptionalReal(s, sample.advantage);
    s.BindText(sample.reward_kind).BindText(sample.reward_fidelity);
    STORE_RETURN_IF_ERROR(WithContext(s.Run(), "storing LLM sample"));
  }
  STORE_RETURN_IF_ERROR(txn.Commit());
  return id;
}

absl::Status Store::SetLlmSampleOutcome(int64_t exchange_id, int sample_index,
                                        const LlmSample& o) {
  absl::MutexLock lock(&mu_);
  STORE_ASSIGN_OR_RETURN(
      Stmt s, db_->Prepare("UPDATE llm_samples SET candidate_id = coalesce(?, candidate_id), "
                           "reward = ?, advantage = ?, reward_kind = ?, reward_fidelity = ? "
                           "WHERE exchange_id = ? AND sample_index = ?"));
  s.BindTextOrNull(o.candidate_id);
  store_internal::BindOptionalReal(s, o.reward);
  store_internal::BindOptionalReal(s, o.advantage);
  s.BindText(o.reward_kind).BindText(o.reward_fidelity).BindInt(exchange_id).BindInt(sample_index);
  STORE_RETURN_IF_ERROR(WithContext(s.Run(), "updating LLM sample"));
  if (db_->Changes() == 0) {
    return absl::NotFoundError(
        absl::StrCat("no LLM sample ", sample_index, " of exchange ", exchange_id));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<LlmExchange>> Store::ListLlmExchanges(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  static const std::string kSql = absl::StrCat(
      "SELECT e.id, e.job_id, e.candidate_id, e.model, e.endpoint, e.prompt, e.response, "
      "e.prompt_tokens, e.completion_tokens, e.latency_ms, e.error, e.created_at, "
      "e.system_prompt, e.messages, e.prompt_version, e.recipe, e.cost_usd, e.http_requests, ",
      store_internal::ProblemColumns("p."),
      " FROM llm_exchanges e LEFT JOIN problems p ON p.id = e.problem_id WHERE e.job_id = ? "
      "ORDER BY e.id");
  STORE_ASSIGN_OR_RETURN(Stmt s, db_->Prepare(kSql));
  s.BindText(job_id);
  std::vector<LlmExchange> out;
  std::map<int64_t, size_t> index;
  while (true) {
    STORE_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    LlmExchange& e = out.emplace_back();
    e.id = s.Int(0);
    e.job_id = s.Text(1);
    e.candidate_id = s.Text(2);
    e.model = s.Text(3);
    e.endpoint = s.Text(4);
    e.prompt = s.Text(5);
    e.response = s.Text(6);
    e.prompt_tokens = s.Int(7);
    e.completion_tokens = s.Int(8);
    e.latency_ms = s.Real(9);
    e.error = s.Text(10);
    e.created_unix_ms = s.Int(11);
    e.system_prompt = s.Text(12);
    e.messages_json = s.Text(13);
    e.prompt_version = s.Text(14);
    e.recipe = s.Text(15);
    e.cost_usd = s.Real(16);
    e.http_requests = s.Int(17);
    e.problem = store_internal::ReadOptionalProblem(s, 18);
    index[e.id] = out.size() - 1;
  }
  STORE_ASSIGN_OR_RETURN(
      Stmt q, db_->Prepare("SELECT l.exchange_id, l.id, l.sample_index, l.response, l.candidate_id, "
                           "l.status, l.reason, l.reward, l.advantage, l.reward_kind, "
                           "l.reward_fidelity "
                           "FROM llm_samples l JOIN llm_exchanges e ON e.id = l.exchange_id "
                           "WHERE e.job_id = ? ORDER BY l.exchange_id, l.sample_index"));
  q.BindText(job_id);
  while (true) {
    STORE_ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) return out;
    auto it = index.find(q.Int(0));
    if (it == index.end()) continue;
    LlmSample& l = out[it->second].samples.emplace_back();
    l.id = q.Int(1);
    l.sample_index = static_cast<int>(q.Int(2));
    l.response = q.Text(3);
    l.candidate_id = q.Text(4);
    l.status = q.Text(5);
    l.reason = q.Text(6);
    l.reward = store_internal::OptionalReal(q, 7);
    l.advantage = store_internal::OptionalReal(q, 8);
    l.reward_kind = q.Text(9);
    l.reward_fidelity = q.Text(10);
  }
}

absl::StatusOr<std::optional<LtAlgo>> Store::GetLtAlgo(const v1::Problem& problem,
                                                       const std::string& cublas_version,
                                                       const std::string& figure) {
  STORE_ASSIGN_OR_RETURN(std::vector<LtAlgo> all, GetLtAlgos(problem, cublas_version));
  for (LtAlgo& a : all) {
    if (a.figure == figure) return std::optional<LtAlgo>(std::move(a));
  }
  return std::optional<LtAlgo>();
}

absl::StatusOr<std::vector<LtAlgo>> Store::GetLtAlgos(const v1::Problem& problem,
                                                      const std::string& cublas_version) {
  absl::MutexLock lock(&mu_);
  std::vector<LtAlgo> out;
  STORE_ASSIGN_OR_RETURN(std::optional<int64_t> problem_id,
                         store_internal::FindProblemId(*db_, problem));
  if (!problem_id.has_value()) return out;
  STORE_ASSIGN_OR_RETURN(Stmt s, db_->Prepare("SELECT algo, measured_at, figure FROM lt_algo_cache "
                                              "WHERE problem_id = ? AND cublas_version = ? "
                                              "ORDER BY figure"));
  s.BindInt(*problem_id).BindText(cublas_version);
  while (true) {
    STORE_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return out;
    out.push_back(LtAlgo{s.Blob(0), s.Int(1), s.Text(2)});
  }
}

absl::Status Store::PutLtAlgo(const v1::Problem& problem, const std::string& cublas_version,
                              const LtAlgo& algo) {
  if (algo.algo.empty() || cublas_version.empty()) {
    return absl::InvalidArgumentError("a cuBLASLt cache entry needs algo bytes and a version");
  }
  STORE_RETURN_IF_ERROR(store_internal::FigureColumn(algo.figure).status());
  absl::MutexLock lock(&mu_);
  Transaction txn(*db_);
  STORE_RETURN_IF_ERROR(txn.Begin());
  STORE_ASSIGN_OR_RETURN(int64_t problem_id, store_internal::UpsertProblemRow(*db_, problem));
  {
    STORE_ASSIGN_OR_RETURN(
        Stmt s, db_->Prepare("INSERT INTO lt_algo_cache (problem_id, cublas_version, figure, "
                             "algo, measured_at) VALUES (?, ?, ?, ?, ?) "
                             "ON CONFLICT (problem_id, cublas_version, figure) DO UPDATE SET "
                             "algo = excluded.algo, measured_at = excluded.measured_at"));
    s.BindInt(problem_id).BindText(cublas_version).BindText(algo.figure).BindBlob(algo.algo);
    s.BindInt(algo.measured_unix_ms != 0 ? algo.measured_unix_ms : Now());
    STORE_RETURN_IF_ERROR(s.Run());
  }
  return txn.Commit();
}

}  // namespace anvil
