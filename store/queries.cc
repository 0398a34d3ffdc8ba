// Store: read-side queries: best kernels, search history, exemplars.
// The best of a problem is picked in C++ by proto/figures.h's rule (Beats)
// over its ranking rows in measured order (measurements_history: problem_id,
// measured_at); exemplars use the partial indexes measurements_passed_<figure>
// (problem_id, <figure>_median_us) WHERE verdict = 'passed', whose literal
// condition the queries repeat so SQLite can use them.
#include <algorithm>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "proto/figures.h"
#include "store/codec.h"
#include "store/internal.h"
#include "store/store.h"

namespace anvil {

using store_internal::Db;
using store_internal::Detail;
using store_internal::Stmt;

namespace store_internal {
namespace {

// The speedup spread of every figure over the verified PASSED measurements of
// the kernel's candidate on the measurement's problem (one per runner process).
absl::Status AttachSpreads(Db& db, v1::Kernel* kernel) {
  const v1::Measurement& m = kernel->measurement();
  STORE_ASSIGN_OR_RETURN(std::optional<int64_t> problem_id, FindProblemId(db, m.problem()));
  if (!problem_id.has_value()) return absl::OkStatus();
  STORE_ASSIGN_OR_RETURN(
      Stmt s, db.Prepare(absl::StrCat(MeasurementSelect(),
                                      "WHERE m.candidate_id = ? AND m.problem_id = ? AND "
                                      "m.verdict = 'passed' AND m.verified = 1 ORDER BY m.id")));
  s.BindText(m.candidate_id()).BindInt(*problem_id);
  std::vector<v1::Measurement> runs;
  while (true) {
    STORE_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    STORE_ASSIGN_OR_RETURN(StoredMeasurement r, ReadMeasurementRow(db, s, Detail::kBaselines));
    runs.push_back(std::move(r.measurement));
  }
  for (absl::string_view figure : kFigures) {
    std::vector<double> speedups;
    for (const v1::Measurement& r : runs) {
      const double x = SpeedupOverBestBaseline(r, figure);
      if (x > 0) speedups.push_back(x);
    }
    if (speedups.empty()) continue;
    std::sort(speedups.begin(), speedups.end());
    v1::SpeedupSpread* spread = kernel->add_spreads();
    spread->set_figure(std::string(figure));
    const size_t n = speedups.size();
    spread->set_median(n % 2 ? speedups[n / 2] : 0.5 * (speedups[n / 2 - 1] + speedups[n / 2]));
    spread->set_min(speedups.front());
    spread->set_max(speedups.back());
    spread->set_runs(static_cast<int32_t>(n));
  }
  return absl::OkStatus();
}

// A Kernel from a measurement: its candidate, the build that made it and the
// spread of its verified runs.
absl::StatusOr<v1::Kernel> MakeKernel(Db& db, StoredMeasurement stored) {
  v1::Kernel kernel;
  const std::string& candidate_id = stored.measurement.candidate_id();
  STORE_ASSIGN_OR_RETURN(std::optional<v1::Candidate> candidate, LoadCandidate(db, candidate_id));
  if (!candidate.has_value() && stored.id == 0) {
    return absl::NotFoundError(absl::StrCat("no candidate ", candidate_id));
  }
  if (!candidate.has_value()) {
    return absl::DataLossError(absl::StrCat("measurement ", stored.id, " names candidate ",
                                            candidate_id, " which is not stored"));
  }
  *kernel.mutable_candidate() = *std::move(candidate);
  STORE_ASSIGN_OR_RETURN(std::optional<v1::Build> build,
                         LoadLatestBuild(db, candidate_id, /*prefer_passed=*/true));
  if (build.has_value()) *kernel.mutable_build() = *std::move(build);
  *kernel.mutable_measurement() = std::move(stored.measurement);
  STORE_RETURN_IF_ERROR(AttachSpreads(db, &kernel));
  return kernel;
}

// Steps through a MeasurementSelect() statement, keeping the first row of
// each candidate not in `skip`, up to n rows.
absl::StatusOr<std::vector<Exemplar>> DistinctCandidates(Db& db, Stmt& stmt, int n,
                                                         std::unordered_set<std::string>* skip) {
  std::vector<Exemplar> out;
  while (static_cast<int>(out.size()) < n) {
    STORE_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    if (!skip->insert(stmt.Text(kMeasurementCandidateColumn)).second) continue;
    Exemplar& e = out.emplace_back();
    STORE_ASSIGN_OR_RETURN(e.measurement, ReadMeasurementRow(db, stmt, Detail::kBaselines));
  }
  return out;
}

// The id of the best row of a statement selecting (id, verified, median by
// the figure) of PASSED measurements in measured order, by proto/figures.h's
// rule: the lowest median wins and of equal ones the first measured. Only a
// verified row wins, or with `verified_first` the best unverified one when
// no row is verified. nullopt when no row ranks.
absl::StatusOr<std::optional<int64_t>> PickBest(Stmt& rows, bool verified_first) {
  std::optional<int64_t> best[2];  // [verified]
  double best_us[2] = {0, 0};
  while (true) {
    STORE_ASSIGN_OR_RETURN(bool row, rows.Step());
    if (!row) break;
    const int v = rows.Int(1) != 0 ? 1 : 0;
    const double us = rows.IsNull(2) ? 0 : rows.Real(2);
    if (Beats(us, best_us[v])) best[v] = rows.Int(0), best_us[v] = us;
  }
  if (best[1].has_value() || !verified_first) return best[1];
  return best[0];
}

// The id of a problem's best verified PASSED measurement by the figure whose
// median is `column`, or nullopt.
absl::StatusOr<std::optional<int64_t>> BestVerifiedId(Db& db, int64_t problem_id,
                                                      const std::string& column) {
  STORE_ASSIGN_OR_RETURN(
      Stmt s, db.Prepare(absl::StrCat("SELECT m.id, m.verified, m.", column,
                                      " FROM measurements m WHERE m.problem_id = ? AND "
                                      "m.verdict = 'passed' AND m.verified = 1 AND m.", column,
                                      " IS NOT NULL ORDER BY m.measured_at, m.id")));
  s.BindInt(problem_id);
  return PickBest(s, /*verified_first=*/false);
}

// The measurement GetKernel attaches (see store.h), or nullopt.
absl::StatusOr<std::optional<StoredMeasurement>> CandidateMeasurement(
    Db& db, const std::string& candidate_id, std::optional<int64_t> problem_id,
    const std::string& column, const std::optional<std::string>& job_id) {
  std::string where = absl::StrCat("WHERE m.candidate_id = ? AND m.verdict = 'passed' ",
                                   job_id.has_value() ? "AND m.job_id = ? " : "");
  std::optional<int64_t> id;
  if (problem_id.has_value()) {  // its best there, verified first
    STORE_ASSIGN_OR_RETURN(
        Stmt s, db.Prepare(absl::StrCat("SELECT m.id, m.verified, m.", column,
                                        " FROM measurements m ", where,
                                        "AND m.problem_id = ? AND m.", column,
                                        " IS NOT NULL ORDER BY m.measured_at, m.id")));
    s.BindText(candidate_id);
    if (job_id.has_value()) s.BindText(*job_id);
    s.BindInt(*problem_id);
    STORE_ASSIGN_OR_RETURN(id, PickBest(s, /*verified_first=*/true));
  } else {  // its latest, verified first
    STORE_ASSIGN_OR_RETURN(
        Stmt s, db.Prepare(absl::StrCat(
                    "SELECT m.id FROM measurements m ", where,
                    "ORDER BY m.verified DESC, m.measured_at DESC, m.id DESC LIMIT 1")));
    s.BindText(candidate_id);
    if (job_id.has_value()) s.BindText(*job_id);
    STORE_ASSIGN_OR_RETURN(bool row, s.Step());
    if (row) id = s.Int(0);
  }
  if (!id.has_value()) return std::optional<StoredMeasurement>();
  return LoadMeasurement(db, *id, Detail::kFull);
}

absl::Status AttachCandidates(Db& db, std::vector<Exemplar>* exemplars) {
  for (Exemplar& e : *exemplars) {
    const std::string& id = e.measurement.measurement.candidate_id();
    STORE_ASSIGN_OR_RETURN(std::optional<v1::Candidate> candidate, LoadCandidate(db, id));
    if (candidate.has_value()) e.candidate = *std::move(candidate);
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace store_internal

absl::StatusOr<std::optional<v1::Kernel>> Store::BestKernel(const v1::Problem& problem,
                                                            const std::string& figure) {
  STORE_ASSIGN_OR_RETURN(std::string column, store_internal::FigureColumn(figure));
  absl::MutexLock lock(&mu_);
  STORE_ASSIGN_OR_RETURN(std::optional<int64_t> problem_id,
                         store_internal::FindProblemId(*db_, problem));
  if (!problem_id.has_value()) return std::optional<v1::Kernel>();
  STORE_ASSIGN_OR_RETURN(std::optional<int64_t> best_id,
                         store_internal::BestVerifiedId(*db_, *problem_id, column));
  if (!best_id.has_value()) return std::optional<v1::Kernel>();
  STORE_ASSIGN_OR_RETURN(std::optional<StoredMeasurement> best,
                         store_internal::LoadMeasurement(*db_, *best_id, Detail::kFull));
  if (!best.has_value()) return std::optional<v1::Kernel>();
  STORE_ASSIGN_OR_RETURN(v1::Kernel kernel, store_internal::MakeKernel(*db_, *std::move(best)));
  return std::optional<v1::Kernel>(std::move(kernel));
}

absl::StatusOr<std::vector<v1::Kernel>> Store::ListBestKernels(const std::string& gpu,
                                                               v1::Layout layout,
                                                               const std::string& figure,
                                                               int limit) {
  STORE_ASSIGN_OR_RETURN(std::string column, store_internal::FigureColumn(figure));
  absl::MutexLock lock(&mu_);
  std::vector<int64_t> problem_ids;
  {
    STORE_ASSIGN_OR_RETURN(
        Stmt s, db_->Prepare("SELECT p.id FROM problems p WHERE (?1 = '' OR p.gpu = ?1) AND "
                             "(?2 = '' OR p.layout = ?2) ORDER BY p.gpu, p.arch, p.m, p.n, p.k, "
                             "p.layout"));
    s.BindText(gpu).BindText(store_internal::LayoutText(layout));
    while (true) {
      STORE_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      problem_ids.push_back(s.Int(0));
    }
  }
  const size_t max_rows = limit > 0 ? static_cast<size_t>(limit) : 100;
  std::vector<int64_t> best_ids;  // problems without a verified winner have none
  for (size_t i = 0; i < problem_ids.size() && best_ids.size() < max_rows; ++i) {
    STORE_ASSIGN_OR_RETURN(std::optional<int64_t> id,
                           store_internal::BestVerifiedId(*db_, problem_ids[i], column));
    if (id.has_value()) best_ids.push_back(*id);
  }
  std::vector<v1::Kernel> kernels;
  for (int64_t id : best_ids) {
    STORE_ASSIGN_OR_RETURN(std::optional<StoredMeasurement> m,
                           store_internal::LoadMeasurement(*db_, id, Detail::kFull));
    if (!m.has_value()) continue;
    STORE_ASSIGN_OR_RETURN(v1::Kernel kernel, store_internal::MakeKernel(*db_, *std::move(m)));
    kernels.push_back(std::move(kernel));
  }
  return kernels;
}

absl::StatusOr<v1::Kernel> Store::GetKernel(const std::string& candidate_id,
                                            const std::optional<v1::Problem>& problem,
                                            const std::string& figure,
                                            const std::optional<std::string>& job_id) {
  STORE_ASSIGN_OR_RETURN(std::string column, store_internal::FigureColumn(figure));
  absl::MutexLock lock(&mu_);
  std::optional<int64_t> problem_id;
  if (problem.has_value()) {
    STORE_ASSIGN_OR_RETURN(problem_id, store_internal::FindProblemId(*db_, *problem));
  }
  std::optional<StoredMeasurement> chosen;
  if (!problem.has_value() || problem_id.has_value()) {
    STORE_ASSIGN_OR_RETURN(
        chosen, store_internal::CandidateMeasurement(*db_, candidate_id, problem_id, column, job_id));
  }
  if (chosen.has_value()) return store_internal::MakeKernel(*db_, *std::move(chosen));
  StoredMeasurement none;
  none.measurement.set_candidate_id(candidate_id);
  STORE_ASSIGN_OR_RETURN(v1::Kernel kernel, store_internal::MakeKernel(*db_, std::move(none)));
  kernel.clear_measurement();
  return kernel;
}

absl::StatusOr<std::vector<StoredMeasurement>> Store::SearchHistory(
    const v1::Problem& problem, const std::optional<std::string>& job_id) {
  absl::MutexLock lock(&mu_);
  STORE_ASSIGN_OR_RETURN(std::optional<int64_t> problem_id,
                         store_internal::FindProblemId(*db_, problem));
  std::vector<StoredMeasurement> history;
  if (!problem_id.has_value()) return history;
  static const std::string kAll = absl::StrCat(
      store_internal::MeasurementSelect(), "WHERE m.problem_id = ? ORDER BY m.measured_at, m.id");
  static const std::string kJob =
      absl::StrCat(store_internal::MeasurementSelect(),
                   "WHERE m.job_id = ? AND m.problem_id = ? ORDER BY m.measured_at, m.id");
  STORE_ASSIGN_OR_RETURN(Stmt s, db_->Prepare(job_id.has_value() ? kJob : kAll));
  if (job_id.has_value()) s.BindText(*job_id);
  s.BindInt(*problem_id);
  while (true) {
    STORE_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return history;
    STORE_ASSIGN_OR_RETURN(StoredMeasurement m,
                           store_internal::ReadMeasurementRow(*db_, s, Detail::kBaselines));
    history.push_back(std::move(m));
  }
}

absl::StatusOr<ExemplarSet> Store::Exemplars(const v1::Problem& problem, const std::string& figure,
                                             int n) {
  STORE_ASSIGN_OR_RETURN(std::string column, store_internal::FigureColumn(figure));
  absl::MutexLock lock(&mu_);
  ExemplarSet set;
  STORE_ASSIGN_OR_RETURN(std::optional<int64_t> problem_id,
                         store_internal::FindProblemId(*db_, problem));
  if (!problem_id.has_value() || n <= 0) return set;
  std::unordered_set<std::string> seen;
  for (const char* order : {"ASC", "DESC"}) {
    STORE_ASSIGN_OR_RETURN(
        Stmt s, db_->Prepare(absl::StrCat(store_internal::MeasurementSelect(),
                                          "WHERE m.problem_id = ? AND m.verdict = 'passed' AND m.",
                                          column, " IS NOT NULL ORDER BY m.", column, " ", order,
                                          ", m.id ", order)));
    s.BindInt(*problem_id);
    std::vector<Exemplar>& out = order[0] == 'A' ? set.fastest : set.slowest;
    STORE_ASSIGN_OR_RETURN(out, store_internal::DistinctCandidates(*db_, s, n, &seen));
  }
  STORE_RETURN_IF_ERROR(store_internal::AttachCandidates(*db_, &set.fastest));
  STORE_RETURN_IF_ERROR(store_internal::AttachCandidates(*db_, &set.slowest));
  return set;
}

}  // namespace anvil
