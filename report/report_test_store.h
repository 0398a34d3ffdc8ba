// Test data for the report and status page tests: a store holding what a
// small search writes (a job over three problems on an H100, candidates from
// the seed, embedded and LLM proposers improving over time, failures of every
// kind, compile errors, rewards with context recipes, a worker). Test code only.
#ifndef ANVIL_REPORT_REPORT_TEST_STORE_H_
#define ANVIL_REPORT_REPORT_TEST_STORE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "store/store.h"

namespace anvil::report::testing {

inline constexpr char kTestJob[] = "job-report-test";
inline constexpr char kTestGpu[] = "H100-SXM5-80GB";
inline constexpr int64_t kTestStart = 1'790'000'000'000;  // ms since epoch

// Writes the search into `store` (expected empty). `clock` is the store's
// clock (StoreOptions::now_unix_ms reads it); it is advanced as rows are written.
absl::Status WriteTestSearch(Store& store, std::atomic<int64_t>& clock);

// A store at `path` on `clock` with the test search written into it.
absl::StatusOr<std::unique_ptr<Store>> OpenTestStore(const std::string& path,
                                                     std::atomic<int64_t>& clock);

// One more measurement of the test job (a running job progressing), faster by
// `gain` than the problem's best; returns after storing it.
absl::Status ProgressTestJob(Store& store, std::atomic<int64_t>& clock, int step);

}  // namespace anvil::report::testing

#endif  // ANVIL_REPORT_REPORT_TEST_STORE_H_
