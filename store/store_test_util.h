// Test helpers for the store tests: temporary directories, realistic rows,
// a fixture with an open store and a settable clock, and raw SQLite access to
// tamper with or inspect a database file. Not thread-safe; test code only.
#ifndef ANVIL_STORE_STORE_TEST_UTIL_H_
#define ANVIL_STORE_STORE_TEST_UTIL_H_

#include <sqlite3.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "proto/problem.h"
#include "store/store.h"

namespace anvil::testing_util {

// A fresh directory under the test temp dir, removed on destruction.
class TempDir {
 public:
  TempDir() {
    std::string pattern = ::testing::TempDir() + "anvil_store_XXXXXX";
    char* made = mkdtemp(pattern.data());
    EXPECT_NE(made, nullptr);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline v1::Problem TestProblem(int64_t m, int64_t n, int64_t k, v1::Layout layout = v1::LAYOUT_NT,
                               const std::string& gpu = "H100-SXM5-80GB") {
  v1::Shape shape;
  shape.set_m(m);
  shape.set_n(n);
  shape.set_k(k);
  return MakeProblem(gpu, "sm_90a", shape, layout);
}

inline v1::Candidate TestCandidate(const std::string& id, const std::string& parent = "") {
  v1::Candidate c;
  c.set_id(id);
  c.set_name(absl::StrCat("sm90_wgmma_128x256x64_", id.substr(0, 8)));
  c.set_source(absl::StrCat("// kernel ", id, "\nextern \"C\" int anvil_gemm() { return 0; }\n"));
  (*c.mutable_params())["BM"] = "128";
  (*c.mutable_params())["BN"] = "256";
  c.set_proposer("embedded");
  if (!parent.empty()) c.add_parent_ids(parent);
  c.set_family("sm90_wgmma_tma");
  c.set_layout(v1::LAYOUT_NT);
  c.set_flags("-O3");
  c.set_arch("sm_90a");
  return c;
}

inline void FillStats(double median, int samples, v1::TimingStats* s) {
  s->set_median_us(median);
  s->set_min_us(median * 0.97);
  s->set_p90_us(median * 1.04);
  s->set_spread(0.05);
  s->set_samples(samples);
  for (int i = 0; i < samples; ++i) s->add_sample_us(median * (0.97 + 0.001 * (i % 50)));
}

// A PASSED measurement whose four figures are device_us scaled, with the
// three vendor baselines; `samples` samples per figure.
inline v1::Measurement TestMeasurement(const std::string& candidate_id, const v1::Problem& problem,
                                       double device_us, int samples = 5) {
  v1::Measurement m;
  m.set_candidate_id(candidate_id);
  *m.mutable_problem() = problem;
  m.set_verdict(v1::VERDICT_PASSED);
  m.set_rel_err(1e-3);
  FillStats(device_us, samples, m.mutable_timings()->mutable_device());
  FillStats(device_us * 1.3, samples, m.mutable_timings()->mutable_cold());
  FillStats(device_us * 1.05, samples, m.mutable_timings()->mutable_warm());
  FillStats(device_us * 1.2, samples, m.mutable_timings()->mutable_call());
  m.mutable_timings()->set_first_call_us(device_us * 40);
  FillStats(device_us * 0.95, samples, m.mutable_timings()->mutable_graph_hot());
  FillStats(device_us * 1.5, samples, m.mutable_timings()->mutable_graph_cold());
  m.mutable_timings()->set_graph_calls_hot(100);
  m.mutable_timings()->set_graph_calls_cold(120);
  m.mutable_timings()->set_graph_cold_sets(24);
  for (const char* name : {"cublas", "cublaslt_heuristic", "cublaslt_auto"}) {
    v1::Baseline* b = m.add_baselines();
    b->set_name(name);
    FillStats(device_us * 1.1, samples, b->mutable_timings()->mutable_device());
    FillStats(device_us * 1.4, samples, b->mutable_timings()->mutable_cold());
    FillStats(device_us * 1.0, samples, b->mutable_timings()->mutable_graph_hot());
    FillStats(device_us * 1.6, samples, b->mutable_timings()->mutable_graph_cold());
    b->set_rel_err(2e-4);
    b->set_kernels("sm90_xmma_gemm_f16f16_f32");
    b->set_algo_index(std::string(name) == "cublaslt_auto" ? 3 : -1);
  }
  m.set_sol_us(device_us * 0.6);
  m.set_efficiency(0.6);
  m.set_graph_capturable(true);
  m.set_kernels_per_call(1);
  m.add_kernel_names("anvil_kernel");
  m.set_streams_per_call(1);
  (*m.mutable_profile())["sm__throughput.avg.pct_of_peak"] = 71.5;
  m.set_gpu_uuid("GPU-1234");
  m.set_worker("worker-1");
  m.set_seconds(2.5);
  m.set_versions("cuda=13.0 cublas=13.1.0");
  return m;
}

// The store at path, or nullptr after a failed expectation.
inline std::unique_ptr<Store> OpenOrDie(const std::string& path, StoreOptions options = {}) {
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(path, options);
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? *std::move(store) : nullptr;
}

// A fresh store whose clock reads clock_ (starting at 1'000'000 ms), with
// candidates cand0 .. cand7 stored.
class StoreFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    StoreOptions options;
    options.now_unix_ms = [this] { return clock_.load(); };
    absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(dir_.File("anvil.db"), options);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    for (int i = 0; i < 8; ++i) {
      ASSERT_TRUE(store_->PutCandidate(TestCandidate(absl::StrCat("cand", i))).ok());
    }
  }

  // Stores a measurement; returns its id.
  int64_t Put(int candidate, const v1::Problem& problem, double device_us, bool verified,
              v1::Verdict verdict = v1::VERDICT_PASSED, int64_t measured_at = 0) {
    v1::Measurement m = TestMeasurement(absl::StrCat("cand", candidate), problem, device_us);
    m.set_verdict(verdict);
    m.set_verified(verified);
    m.set_measured_at_unix_ms(measured_at);
    absl::StatusOr<int64_t> id = store_->PutMeasurement(m);
    EXPECT_TRUE(id.ok()) << id.status();
    return id.value_or(0);
  }

  TempDir dir_;
  std::atomic<int64_t> clock_{1'000'000};
  std::unique_ptr<Store> store_;
};

// Raw SQLite on a file, for tampering and inspection.
inline int64_t RawInt(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr), SQLITE_OK) << sql;
  int64_t value = -1;
  if (sqlite3_step(stmt) == SQLITE_ROW) value = sqlite3_column_int64(stmt, 0);
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return value;
}

inline std::string RawText(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr), SQLITE_OK) << sql;
  std::string value;
  if (sqlite3_step(stmt) == SQLITE_ROW) {
    const unsigned char* text = sqlite3_column_text(stmt, 0);
    if (text != nullptr) value = reinterpret_cast<const char*>(text);
  }
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return value;
}

inline void RawExec(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr),
            SQLITE_OK);
  char* error = nullptr;
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error), SQLITE_OK)
      << (error != nullptr ? error : "");
  sqlite3_free(error);
  sqlite3_close(db);
}

}  // namespace anvil::testing_util

#endif  // ANVIL_STORE_STORE_TEST_UTIL_H_
