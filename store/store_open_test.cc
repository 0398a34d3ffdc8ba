// Store tests: opening, creating and migrating store files, refusing the
// ones that are not Anvil's (missing, newer, garbage, foreign), read-only
// stores, and the one-writer lock. Rows and batches: store_test.cc.
#include <filesystem>
#include <fstream>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/figures.h"
#include "store/schema.h"
#include "store/store.h"
#include "store/store_test_util.h"
#include "store/writer_lock.h"

namespace anvil {
namespace {

using ::testing::HasSubstr;
using testing_util::OpenOrDie;
using testing_util::RawExec;
using testing_util::RawInt;
using testing_util::RawText;
using testing_util::TempDir;
using testing_util::TestCandidate;
using testing_util::TestProblem;

StoreOptions NoCreate() {
  StoreOptions options;
  options.create_if_missing = false;
  return options;
}

StoreOptions ReadOnly(bool read_only = true) {
  StoreOptions options;
  options.read_only = read_only;
  return options;
}

TEST(StoreOpenTest, CreatesMigratesAndReopens) {
  TempDir dir;
  const std::string path = dir.File("anvil.db");
  {
    auto store = OpenOrDie(path);
    ASSERT_NE(store, nullptr);
    EXPECT_EQ(store->SchemaVersion(), Store::LatestSchemaVersion());
    ASSERT_TRUE(store->PutCandidate(TestCandidate("c1")).ok());
  }
  EXPECT_EQ(RawText(path, "PRAGMA journal_mode"), "wal");
  EXPECT_EQ(RawInt(path, "PRAGMA application_id"), 0x416e766c);  // "Anvl"
  EXPECT_EQ(RawInt(path, "PRAGMA user_version"), Store::LatestSchemaVersion());
  auto store = OpenOrDie(path, NoCreate());
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->SchemaVersion(), Store::LatestSchemaVersion());
  EXPECT_TRUE(store->GetCandidate("c1").ok());
}

// Version 2 forgets the cuBLASLt choices tuned by version 1's method and keeps
// everything else.
TEST(StoreOpenTest, VersionTwoForgetsTheCachedCublasLtChoices) {
  TempDir dir;
  const std::string path = dir.File("anvil.db");
  const v1::Problem p = TestProblem(1000, 1000, 1000);
  ASSERT_TRUE(store_internal::CreateAtSchemaVersion(path, 1).ok());
  RawExec(path, "INSERT INTO problems (gpu, arch, m, n, k, layout, dtype) VALUES "
                "('H100-SXM5-80GB', 'sm_90a', 1000, 1000, 1000, 'nt', 'f16_f32acc');"
                "INSERT INTO lt_algo_cache VALUES (1, '130100', x'61', 0);");
  auto store = OpenOrDie(path);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->SchemaVersion(), Store::LatestSchemaVersion());
  EXPECT_FALSE(store->GetLtAlgo(p, "130100")->has_value());
  // A choice tuned now is kept across reopening.
  ASSERT_TRUE(store->PutLtAlgo(p, "130100", {std::string(64, 'b'), 0}).ok());
  store.reset();
  store = OpenOrDie(path);
  ASSERT_NE(store, nullptr);
  EXPECT_TRUE(store->GetLtAlgo(p, "130100")->has_value());
}

// Version 3 adds the graph figures: rows measured before keep their figures,
// have no graph figures and say why; the cached cuBLASLt choices become the
// device-time ones.
TEST(StoreOpenTest, VersionThreeKeepsOldRowsAndSaysTheyHaveNoGraphFigures) {
  TempDir dir;
  const std::string path = dir.File("anvil.db");
  const v1::Problem p = TestProblem(1000, 1000, 1000);
  ASSERT_TRUE(store_internal::CreateAtSchemaVersion(path, 2).ok());
  RawExec(path,
          "INSERT INTO problems (gpu, arch, m, n, k, layout, dtype) VALUES "
          "('H100-SXM5-80GB', 'sm_90a', 1000, 1000, 1000, 'nt', 'f16_f32acc');"
          "INSERT INTO candidates VALUES ('c1', 'n', 's', '{}', 'seed', 'f', 'nt', '', 'sm_90a', 0);"
          "INSERT INTO measurements (candidate_id, problem_id, verdict, reason, detail, rel_err, "
          "exact_max_abs_err, device_median_us, device_min_us, device_p90_us, device_spread, "
          "device_samples, sol_us, efficiency, graph_capturable, kernels_per_call, kernel_names, "
          "streams_per_call, workspace_bytes, profile, gpu_uuid, worker, measured_at, seconds, "
          "versions, verified, created_at) VALUES ('c1', 1, 'passed', '', '', 0, 0, 7.5, 7.4, 7.7, "
          "0.01, 6, 5, 0.6, 1, 1, '[]', 1, 0, '{}', 'GPU-1', 'w', 1, 1, 'cuda=13.0', 1, 1);"
          "INSERT INTO lt_algo_cache VALUES (1, '130100', x'61', 0);");
  auto store = OpenOrDie(path);
  ASSERT_NE(store, nullptr);
  absl::StatusOr<StoredMeasurement> m = store->GetMeasurement(1);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_DOUBLE_EQ(m->measurement.timings().device().median_us(), 7.5);
  EXPECT_FALSE(m->measurement.timings().has_graph_cold());
  EXPECT_EQ(m->measurement.graph_note(), kPredatesGraphTiming);
  EXPECT_EQ(m->measurement.fidelity(), v1::FIDELITY_FULL);  // every row before fidelities
  EXPECT_TRUE(PredatesFigure(m->measurement, "graph-cold"));
  EXPECT_FALSE(PredatesFigure(m->measurement, "device"));
  std::optional<LtAlgo> device = *store->GetLtAlgo(p, "130100", "device");
  ASSERT_TRUE(device.has_value());
  EXPECT_EQ(device->algo, "a");
  EXPECT_FALSE(store->GetLtAlgo(p, "130100", "graph-cold")->has_value());
  // Ranked by device time the old row still wins; by a graph figure it has none.
  EXPECT_TRUE(store->BestKernel(p, "device")->has_value());
  EXPECT_FALSE(store->BestKernel(p, "graph-cold")->has_value());
}

// Version 7 sets aside the graph figures of the two-stream runner: the rows
// keep their other figures and say why they have none, the figures stay in
// graph_figures_before_7 and graph_samples_before_7, and the graph-regime
// cuBLASLt choices are tuned again.
TEST(StoreOpenTest, VersionSevenSetsAsideTheTwoStreamRunnersGraphFigures) {
  TempDir dir;
  const std::string path = dir.File("anvil.db");
  const v1::Problem p = TestProblem(256, 128, 128);
  ASSERT_TRUE(store_internal::CreateAtSchemaVersion(path, 6).ok());
  RawExec(path,
          "INSERT INTO problems (gpu, arch, m, n, k, layout, dtype) VALUES "
          "('H100-SXM5-80GB', 'sm_90a', 256, 128, 128, 'nt', 'f16_f32acc');"
          "INSERT INTO candidates VALUES ('c1', 'n', 's', '{}', 'seed', 'f', 'nt', '', 'sm_90a', 0);"
          "INSERT INTO measurements (candidate_id, problem_id, verdict, reason, detail, rel_err, "
          "exact_max_abs_err, device_median_us, device_min_us, device_p90_us, device_spread, "
          "device_samples, sol_us, efficiency, graph_capturable, kernels_per_call, kernel_names, "
          "streams_per_call, workspace_bytes, profile, gpu_uuid, worker, measured_at, seconds, "
          "versions, verified, created_at, graph_hot_median_us, graph_cold_median_us, "
          "graph_calls_hot, graph_note) VALUES ('c1', 1, 'passed', '', '', 0, 0, 1.8, 1.8, 1.9, "
          "0.01, 6, 0.1, 0.05, 1, 1, '[]', 1, 0, '{}', 'GPU-1', 'w', 1, 1, 'cuda=13.0', 1, 1, "
          "1.48, 1.82, 548, '');"
          "INSERT INTO baselines (measurement_id, name, device_median_us, rel_err, kernels, "
          "algo_index, graph_hot_median_us, graph_cold_median_us) VALUES "
          "(1, 'cublas', 2.2, 0, 'k', -1, 2.35, 2.88);"
          "INSERT INTO samples (measurement_id, baseline_id, device_us, graph_hot_us) VALUES "
          "(1, NULL, x'000000000000F03F', x'0000000000000040');"
          "INSERT INTO lt_algo_cache VALUES (1, '130100', 'device', x'61', 0);"
          "INSERT INTO lt_algo_cache VALUES (1, '130100', 'graph-cold', x'62', 0);");
  auto store = OpenOrDie(path);
  ASSERT_NE(store, nullptr);
  absl::StatusOr<StoredMeasurement> m = store->GetMeasurement(1);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_DOUBLE_EQ(m->measurement.timings().device().median_us(), 1.8);
  EXPECT_FALSE(m->measurement.timings().has_graph_hot());
  EXPECT_FALSE(m->measurement.timings().has_graph_cold());
  ASSERT_EQ(m->measurement.baselines_size(), 1);
  EXPECT_FALSE(m->measurement.baselines(0).timings().has_graph_cold());
  EXPECT_EQ(m->measurement.graph_note(), kGraphFiguresWithdrawn);
  EXPECT_TRUE(PredatesFigure(m->measurement, "graph-cold"));
  EXPECT_FALSE(PredatesFigure(m->measurement, "device"));
  EXPECT_EQ(RawInt(path, "SELECT count(*) FROM graph_figures_before_7"), 2);
  EXPECT_EQ(RawText(path, "SELECT graph_cold_median_us FROM graph_figures_before_7 "
                          "WHERE source = 'baseline' AND id = 1"),
            "2.88");
  EXPECT_EQ(RawInt(path, "SELECT graph_calls_hot FROM graph_figures_before_7 "
                         "WHERE source = 'measurement'"),
            548);
  EXPECT_EQ(RawInt(path, "SELECT count(*) FROM graph_samples_before_7 "
                         "WHERE graph_hot_us = x'0000000000000040'"),
            1);
  EXPECT_EQ(RawInt(path, "SELECT count(*) FROM samples WHERE graph_hot_us IS NOT NULL"), 0);
  EXPECT_TRUE(store->GetLtAlgo(p, "130100", "device")->has_value());
  EXPECT_FALSE(store->GetLtAlgo(p, "130100", "graph-cold")->has_value());
  EXPECT_TRUE(store->BestKernel(p, "device")->has_value());
  EXPECT_FALSE(store->BestKernel(p, "graph-cold")->has_value());
}

TEST(StoreOpenTest, MissingFileIsNotFound) {
  TempDir dir;
  const std::string path = dir.File("missing.db");
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(path, NoCreate());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(store.status().message()), HasSubstr(path));
  store = Store::Open(path, ReadOnly());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(StoreOpenTest, NewerSchemaIsRefused) {
  TempDir dir;
  const std::string path = dir.File("anvil.db");
  OpenOrDie(path);
  RawExec(path, "PRAGMA user_version = 99");
  for (bool read_only : {false, true}) {
    absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(path, ReadOnly(read_only));
    EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(std::string(store.status().message()),
                HasSubstr(absl::StrCat("database schema version 99 is newer than this Anvil "
                                       "(knows up to ",
                                       Store::LatestSchemaVersion(), "); upgrade Anvil")));
  }
}

TEST(StoreOpenTest, GarbageFileIsRefused) {
  TempDir dir;
  const std::string path = dir.File("garbage.db");
  {
    std::ofstream out(path, std::ios::binary);
    std::mt19937 rng(7);
    for (int i = 0; i < 8192; ++i) out.put(static_cast<char>(rng()));
  }
  for (bool read_only : {false, true}) {
    absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(path, ReadOnly(read_only));
    EXPECT_EQ(store.status().code(), absl::StatusCode::kDataLoss) << store.status();
    EXPECT_THAT(std::string(store.status().message()),
                HasSubstr("not an Anvil database or is corrupt"));
  }
}

TEST(StoreOpenTest, ForeignSqliteDatabaseIsRefused) {
  TempDir dir;
  const std::string path = dir.File("other.db");
  RawExec(path, "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)");
  for (bool read_only : {false, true}) {
    absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(path, ReadOnly(read_only));
    EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(std::string(store.status().message()), HasSubstr("not an Anvil database"));
  }
  EXPECT_EQ(RawInt(path, "SELECT count(*) FROM sqlite_schema"), 1);  // untouched
}

TEST(StoreOpenTest, EmptySqliteFileReadOnlyIsRefusedReadWriteIsMigrated) {
  TempDir dir;
  const std::string path = dir.File("empty.db");
  std::ofstream(path).close();  // zero bytes: an empty SQLite database
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(path, ReadOnly());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(store.status().message()), HasSubstr("no Anvil schema"));
  EXPECT_NE(OpenOrDie(path, NoCreate()), nullptr);
}

TEST(StoreOpenTest, ReadOnlyStoreReadsButRefusesWrites) {
  TempDir dir;
  const std::string path = dir.File("anvil.db");
  auto writer = OpenOrDie(path);
  ASSERT_TRUE(writer->PutCandidate(TestCandidate("c1")).ok());
  auto reader = OpenOrDie(path, ReadOnly());
  ASSERT_NE(reader, nullptr);
  EXPECT_TRUE(reader->GetCandidate("c1").ok());
  absl::Status status = reader->PutCandidate(TestCandidate("c2"));
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
}

// One writer per store file: a second writer lock is refused naming the
// holder; the lock goes with its holder (here: its destruction).
TEST(WriterLockTest, OneWriterPerStoreFile) {
  TempDir dir;
  const std::string db = dir.File("a.db");
  absl::StatusOr<WriterLock> first = WriterLock::Acquire(db, "anvil serve");
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<WriterLock> second = WriterLock::Acquire(db, "anvil optimize");
  ASSERT_TRUE(absl::IsFailedPrecondition(second.status())) << second.status();
  EXPECT_NE(second.status().message().find("anvil serve, pid"), std::string::npos) << second.status();
  { WriterLock gone = *std::move(first); }
  EXPECT_TRUE(WriterLock::Acquire(db, "anvil optimize").ok());
}

}  // namespace
}  // namespace anvil
