// Internal to report/: what a report covers (its scope: a job, a GPU or the
// whole store) and the sections computed over it besides the per-problem
// ones: ceilings, failures, rewards. Not thread-safe (a CandidateCache is
// one report's).
#ifndef ANVIL_REPORT_SECTIONS_H_
#define ANVIL_REPORT_SECTIONS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "report/report.h"
#include "store/store.h"

namespace anvil::report {

// Candidates by id, read once each; an unknown id reads as an empty candidate.
class CandidateCache {
 public:
  explicit CandidateCache(Store& store) : store_(store) {}
  const v1::Candidate& Get(const std::string& id);

 private:
  Store& store_;
  std::map<std::string, v1::Candidate> cache_;
};

struct ScopedProblem {
  v1::Problem problem;
  std::vector<StoredMeasurement> history;  // in measured order; never empty
};

struct Scope {
  std::vector<ScopedProblem> problems;
  std::vector<std::string> job_ids;  // jobs whose measurements are in scope
  std::string job_figure;            // the job's reward figure (job scope only)
  int64_t t0_ms = 0;                 // the job's start (job scope); 0: each problem's first row
  // Time windows whose builds belong to the scope; empty with all_builds.
  std::vector<std::pair<int64_t, int64_t>> build_windows;
  bool all_builds = false;
  nlohmann::json json;  // what the page says about the scope
};

absl::StatusOr<Scope> LoadScope(Store& store, const ReportOptions& options);

// 2*M*N*K and the bytes of A, B and C (fp16), as the runner's speed of light counts them.
double ProblemFlops(const v1::Problem& p);
double ProblemBytes(const v1::Problem& p);

// Per GPU, the compute and bandwidth ceilings the runner measured, recovered
// from the stored speed-of-light times (sol = max(flops/peak, bytes/bw)).
nlohmann::json Ceilings(const std::vector<ScopedProblem>& problems);

// Time and counts by verdict and by reason, over measurements and builds.
absl::StatusOr<nlohmann::json> Failures(Store& store, const Scope& scope);

// Every reward of the scope's jobs, oldest first, with proposer and context recipe.
absl::StatusOr<nlohmann::json> Rewards(Store& store, const Scope& scope, CandidateCache& candidates);

}  // namespace anvil::report

#endif  // ANVIL_REPORT_SECTIONS_H_
