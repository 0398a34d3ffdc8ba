// Store: aggregate reads for reports and live displays: the problems on a
// GPU, and what a job has measured so far (counts and best speedup per
// problem, computed in SQL so a display can poll it every second).
#include "absl/strings/str_cat.h"
#include "store/codec.h"
#include "store/internal.h"
#include "store/store.h"

namespace anvil {

using store_internal::Db;
using store_internal::Stmt;

namespace store_internal {
namespace {

absl::StatusOr<std::vector<ProblemActivity>> LoadProblemActivity(Db& db, const std::string& job_id,
                                                                  const std::string& column) {
  const std::string sql = absl::StrCat(
      "SELECT ", ProblemColumns("p."),
      ", COUNT(*), COUNT(DISTINCT m.candidate_id), SUM(m.verdict <> 'passed'), "
      "MAX(CASE WHEN m.verdict = 'passed' AND m.", column, " > 0 THEN (SELECT MIN(b.", column,
      ") FROM baselines b WHERE b.measurement_id = m.id) / m.", column,
      " END), MAX(m.measured_at), MIN(m.id) AS first "
      "FROM measurements m JOIN problems p ON p.id = m.problem_id WHERE m.job_id = ? "
      "GROUP BY m.problem_id ORDER BY first");
  STORE_ASSIGN_OR_RETURN(Stmt s, db.Prepare(sql));
  s.BindText(job_id);
  std::vector<ProblemActivity> out;
  while (true) {
    STORE_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return out;
    ProblemActivity& a = out.emplace_back();
    int c = ReadProblem(s, 0, &a.problem);
    a.measurements = s.Int(c);
    a.candidates = s.Int(c + 1);
    a.failed = s.Int(c + 2);
    a.best_speedup = s.IsNull(c + 3) ? 0 : s.Real(c + 3);
    a.last_measured_unix_ms = s.Int(c + 4);
  }
}

}  // namespace
}  // namespace store_internal

absl::StatusOr<std::vector<v1::Problem>> Store::ListProblems(const std::string& gpu) {
  absl::MutexLock lock(&mu_);
  static const std::string kSql = absl::StrCat(
      "SELECT ", store_internal::ProblemColumns(""),
      " FROM problems WHERE (?1 = '' OR gpu = ?1) ORDER BY gpu, arch, m, n, k, layout");
  STORE_ASSIGN_OR_RETURN(Stmt s, db_->Prepare(kSql));
  s.BindText(gpu);
  std::vector<v1::Problem> problems;
  while (true) {
    STORE_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return problems;
    store_internal::ReadProblem(s, 0, &problems.emplace_back());
  }
}

absl::StatusOr<JobActivity> Store::GetJobActivity(const std::string& job_id,
                                                  const std::string& figure) {
  STORE_ASSIGN_OR_RETURN(std::string column, store_internal::FigureColumn(figure));
  absl::MutexLock lock(&mu_);
  JobActivity activity;
  activity.job_id = job_id;
  int64_t since = 0, until = 0;
  {
    STORE_ASSIGN_OR_RETURN(
        Stmt s, db_->Prepare("SELECT created_at, updated_at, state FROM jobs WHERE id = ?"));
    s.BindText(job_id);
    STORE_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return absl::NotFoundError(absl::StrCat("no job ", job_id));
    since = s.Int(0);
    const std::string state = s.Text(2);
    if (state != "queued" && state != "running") until = s.Int(1);
  }
  STORE_ASSIGN_OR_RETURN(activity.problems,
                         store_internal::LoadProblemActivity(*db_, job_id, column));
  for (const ProblemActivity& p : activity.problems) activity.measurements += p.measurements;
  STORE_ASSIGN_OR_RETURN(
      Stmt b, db_->Prepare("SELECT COUNT(*), COALESCE(SUM(verdict <> 'passed'), 0) FROM builds "
                           "WHERE created_at >= ?1 AND (?2 <= 0 OR created_at <= ?2)"));
  b.BindInt(since).BindInt(until);
  STORE_ASSIGN_OR_RETURN(bool row, b.Step());
  if (row) {
    activity.builds = b.Int(0);
    activity.failed_builds = b.Int(1);
  }
  return activity;
}

}  // namespace anvil
