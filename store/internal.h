// Internal to store/: row-level helpers shared by the Store's subsystem
// files (store.cc, candidates.cc, measurements.cc, jobs.cc, exchanges.cc,
// queries.cc). Each works on a Db the caller holds exclusively (the Store's
// mutex) and, where it writes, inside the caller's transaction.
#ifndef ANVIL_STORE_INTERNAL_H_
#define ANVIL_STORE_INTERNAL_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "store/records.h"
#include "store/sqlite.h"

namespace anvil::store_internal {

// Prefixes a non-OK status's message with context; keeps the code.
absl::Status WithContext(const absl::Status& status, absl::string_view context);

// "?, ?, ..., ?" with n placeholders.
std::string Placeholders(int n);

// Problems: the key must be complete (gpu, arch, dims, layout, dtype).
absl::Status ValidateProblemKey(const v1::Problem& problem);
absl::StatusOr<int64_t> UpsertProblemRow(Db& db, const v1::Problem& problem);
absl::StatusOr<std::optional<int64_t>> FindProblemId(Db& db, const v1::Problem& problem);

// Candidates and builds.
absl::StatusOr<std::optional<v1::Candidate>> LoadCandidate(Db& db, const std::string& id);
absl::StatusOr<bool> CandidateExists(Db& db, const std::string& id);
// The newest build of a candidate; with prefer_passed, the newest PASSED one
// when there is one.
absl::StatusOr<std::optional<v1::Build>> LoadLatestBuild(Db& db, const std::string& candidate_id,
                                                         bool prefer_passed);

// Jobs.
absl::StatusOr<bool> JobExists(Db& db, const std::string& job_id);

// Measurements. kBaselines leaves every sample_us empty; kFull fills them.
enum class Detail { kBaselines, kFull };
// SELECT of every measurement column joined with its problem, ending in
// "FROM measurements m JOIN problems p ON p.id = m.problem_id ".
const std::string& MeasurementSelect();
// Column of candidate_id in MeasurementSelect().
inline constexpr int kMeasurementCandidateColumn = 2;
// Reads the current row of a MeasurementSelect() statement and its child rows.
absl::StatusOr<StoredMeasurement> ReadMeasurementRow(Db& db, const Stmt& row, Detail detail);
absl::StatusOr<std::optional<StoredMeasurement>> LoadMeasurement(Db& db, int64_t id, Detail detail);

}  // namespace anvil::store_internal

#endif  // ANVIL_STORE_INTERNAL_H_
