// Store tests: opening and refusing files, migrations, round trips of every
// row kind, atomic batches, full disk and concurrent writers. Queries, jobs
// and the other tables: store_queries_test.cc.
#include "store/store.h"
#include "store/writer_lock.h"

#include <fstream>
#include <random>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "proto/figures.h"
#include "store/schema.h"
#include "store/store_test_util.h"

namespace anvil {
namespace {

using ::google::protobuf::util::MessageDifferencer;
using ::testing::HasSubstr;
using testing_util::RawExec;
using testing_util::RawInt;
using testing_util::RawText;
using testing_util::TempDir;
using testing_util::TestCandidate;
using testing_util::TestMeasurement;
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

std::unique_ptr<Store> OpenOrDie(const std::string& path, StoreOptions options = {}) {
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(path, options);
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? *std::move(store) : nullptr;
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

TEST(StoreRoundTripTest, ProblemUpsertIsIdempotent) {
  TempDir dir;
  auto store = OpenOrDie(dir.File("anvil.db"));
  absl::StatusOr<int64_t> a = store->UpsertProblem(TestProblem(128, 256, 64));
  absl::StatusOr<int64_t> b = store->UpsertProblem(TestProblem(128, 256, 64));
  absl::StatusOr<int64_t> c = store->UpsertProblem(TestProblem(128, 256, 64, v1::LAYOUT_NN));
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_NE(*a, *c);
  v1::Problem no_gpu = TestProblem(1, 1, 1);
  no_gpu.clear_gpu();
  EXPECT_EQ(store->UpsertProblem(no_gpu).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(StoreRoundTripTest, JobRequestIdsUsageAndProblemStatus) {
  TempDir dir;
  auto store = OpenOrDie(dir.File("anvil.db"));
  v1::OptimizeKernelRequest req;
  *req.add_problems() = TestProblem(128, 256, 64);
  absl::StatusOr<std::string> a = store->CreateJobForRequest("job-a", req, "req-1", "hash-1");
  absl::StatusOr<std::string> replay = store->CreateJobForRequest("job-b", req, "req-1", "hash-1");
  ASSERT_TRUE(a.ok() && replay.ok()) << a.status() << replay.status();
  EXPECT_EQ(*a, "job-a");
  EXPECT_EQ(*replay, "job-a");  // the job made the first time
  EXPECT_EQ(store->CreateJobForRequest("job-c", req, "req-1", "hash-2").status().code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(store->GetJob("job-b").status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(store->AddJobUsage("job-a", 10, 4).ok());
  ASSERT_TRUE(store->AddJobUsage("job-a", 5, 1).ok());
  EXPECT_EQ(store->AddJobUsage("job-none", 1, 1).code(), absl::StatusCode::kNotFound);
  v1::ProblemProgress p;
  *p.mutable_problem() = TestProblem(128, 256, 64);
  p.set_candidates_tried(7);
  p.set_status("plateau");
  ASSERT_TRUE(store->UpdateJobProblem("job-a", p).ok());
  absl::StatusOr<v1::Job> job = store->GetJob("job-a");
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->request_id(), "req-1");
  EXPECT_DOUBLE_EQ(job->wall_seconds(), 15);
  EXPECT_DOUBLE_EQ(job->gpu_seconds(), 5);
  ASSERT_EQ(job->problems_size(), 1);
  EXPECT_EQ(job->problems(0).status(), "plateau");
}

TEST(StoreRoundTripTest, Candidate) {
  TempDir dir;
  auto store = OpenOrDie(dir.File("anvil.db"));
  v1::Candidate parent = TestCandidate("p1");
  v1::Candidate child = TestCandidate("c1", "p1");
  child.add_parent_ids("p0-not-stored");
  ASSERT_TRUE(store->PutCandidate(parent).ok());
  ASSERT_TRUE(store->PutCandidate(child).ok());
  ASSERT_TRUE(store->PutCandidate(child).ok());  // idempotent
  absl::StatusOr<v1::Candidate> got = store->GetCandidate("c1");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(MessageDifferencer::Equals(*got, child)) << got->DebugString();
  v1::Candidate changed = child;
  changed.set_source("different");
  EXPECT_EQ(store->PutCandidate(changed).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(store->GetCandidate("nope").status().code(), absl::StatusCode::kNotFound);
}

TEST(StoreRoundTripTest, Build) {
  TempDir dir;
  auto store = OpenOrDie(dir.File("anvil.db"));
  ASSERT_TRUE(store->PutCandidate(TestCandidate("c1")).ok());
  v1::Build build;
  build.set_candidate_id("c1");
  build.set_verdict(v1::VERDICT_COMPILE_ERROR);
  build.set_flags("-O3 -arch=sm_90a");
  build.set_nvcc_version("13.0.88");
  build.set_arch("sm_90a");
  v1::KernelUsage* usage = build.add_usage();
  usage->set_kernel("_Z6kernelv");
  usage->set_registers(168);
  usage->set_shared_bytes(229376);
  build.set_error("error: expected ';'");
  build.set_seconds(12.5);
  build.set_artifact("/cache/ab/c1.so");
  build.set_cache_key("key-1");
  ASSERT_TRUE(store->PutBuild(build).ok());
  v1::Build second = build;
  second.set_verdict(v1::VERDICT_PASSED);
  second.set_cache_hit(true);
  second.set_cache_key("key-2");
  ASSERT_TRUE(store->PutBuild(second).ok());
  absl::StatusOr<std::optional<v1::Build>> latest = store->LatestBuild("c1");
  ASSERT_TRUE(latest.ok() && latest->has_value());
  EXPECT_TRUE(MessageDifferencer::Equals(**latest, second)) << (*latest)->DebugString();
  absl::StatusOr<std::optional<v1::Build>> by_key = store->FindBuildByCacheKey("key-1");
  ASSERT_TRUE(by_key.ok() && by_key->has_value());
  EXPECT_TRUE(MessageDifferencer::Equals(**by_key, build));
  EXPECT_FALSE(store->FindBuildByCacheKey("key-3")->has_value());
  build.set_candidate_id("unknown");
  EXPECT_EQ(store->PutBuild(build).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(StoreRoundTripTest, ListBuildsByTimeWindow) {
  TempDir dir;
  int64_t now = 1000;
  StoreOptions options;
  options.now_unix_ms = [&now] { return now; };
  auto store = OpenOrDie(dir.File("anvil.db"), options);
  ASSERT_TRUE(store->PutCandidate(TestCandidate("c1")).ok());
  for (v1::Verdict verdict : {v1::VERDICT_PASSED, v1::VERDICT_COMPILE_ERROR, v1::VERDICT_REJECTED}) {
    v1::Build build;
    build.set_candidate_id("c1");
    build.set_verdict(verdict);
    build.set_seconds(now / 1000.0);
    build.add_usage()->set_registers(90);
    ASSERT_TRUE(store->PutBuild(build).ok());
    now += 1000;
  }
  absl::StatusOr<std::vector<StoredBuild>> window = store->ListBuilds(2000, 3000);
  ASSERT_TRUE(window.ok()) << window.status();
  ASSERT_EQ(window->size(), 2u);
  EXPECT_EQ((*window)[0].build.verdict(), v1::VERDICT_COMPILE_ERROR);
  EXPECT_EQ((*window)[0].created_unix_ms, 2000);
  EXPECT_EQ((*window)[0].build.usage_size(), 0);
  EXPECT_EQ((*window)[1].build.verdict(), v1::VERDICT_REJECTED);
  EXPECT_EQ(store->ListBuilds(0, 0)->size(), 3u);
  EXPECT_EQ(store->ListBuilds(0, 0, 1)->size(), 1u);
  EXPECT_TRUE(store->ListBuilds(5000, 0)->empty());
}

TEST(StoreRoundTripTest, MeasurementWithBaselinesAndSamples) {
  TempDir dir;
  auto store = OpenOrDie(dir.File("anvil.db"));
  ASSERT_TRUE(store->PutCandidate(TestCandidate("c1")).ok());
  v1::Measurement m = TestMeasurement("c1", TestProblem(4096, 4096, 4096), 812.5, 50);
  m.set_measured_at_unix_ms(1763700000000);
  v1::Measurement failed;  // no timings at all: stays absent
  failed.set_candidate_id("c1");
  *failed.mutable_problem() = TestProblem(4096, 4096, 4096);
  failed.set_verdict(v1::VERDICT_INCORRECT);
  failed.set_reason("unwritten_output");
  failed.set_detail("C[17,3] still NaN");
  failed.set_measured_at_unix_ms(1763700000001);
  std::vector<v1::Measurement> batch = {m, failed};
  absl::StatusOr<std::vector<int64_t>> ids = store->PutMeasurements(batch);
  ASSERT_TRUE(ids.ok()) << ids.status();
  ASSERT_EQ(ids->size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    absl::StatusOr<StoredMeasurement> got = store->GetMeasurement((*ids)[i]);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->id, (*ids)[i]);
    EXPECT_TRUE(MessageDifferencer::Equals(got->measurement, batch[i]))
        << got->measurement.DebugString();
  }
  EXPECT_EQ(store->GetMeasurement(12345).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store->MarkVerified(12345).code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(store->MarkVerified((*ids)[0]).ok());
  EXPECT_TRUE(store->GetMeasurement((*ids)[0])->measurement.verified());
}

TEST(StoreAtomicityTest, FailedBatchLeavesNoPartialRows) {
  TempDir dir;
  const std::string path = dir.File("anvil.db");
  auto store = OpenOrDie(path);
  ASSERT_TRUE(store->PutCandidate(TestCandidate("c1")).ok());
  v1::Problem problem = TestProblem(64, 64, 64);
  ASSERT_TRUE(store->PutMeasurement(TestMeasurement("c1", problem, 10)).ok());
  StoreCounts before = *store->Counts();
  std::vector<v1::Measurement> batch = {TestMeasurement("c1", TestProblem(1, 2, 3), 11),
                                        TestMeasurement("c1", problem, 12),
                                        TestMeasurement("missing", problem, 13)};
  absl::StatusOr<std::vector<int64_t>> ids = store->PutMeasurements(batch);
  EXPECT_EQ(ids.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(ids.status().message()), HasSubstr("measurements[2]"));
  StoreCounts after = *store->Counts();
  EXPECT_EQ(after.measurements, before.measurements);
  EXPECT_EQ(after.baselines, before.baselines);
  EXPECT_EQ(after.problems, before.problems);  // the new problem rolled back too
  EXPECT_EQ(RawInt(path, "SELECT count(*) FROM samples"), 4);
  EXPECT_EQ(store->PutMeasurement(TestMeasurement("c1", problem, 1), "no-such-job").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store->Counts()->measurements, before.measurements);
}

TEST(StoreAtomicityTest, FullDiskIsResourceExhaustedAndKeepsEarlierRows) {
  TempDir dir;
  StoreOptions options;
  options.max_page_count = 64;  // 256 KiB at the default page size
  auto store = OpenOrDie(dir.File("anvil.db"), options);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->PutCandidate(TestCandidate("c1")).ok());
  std::vector<int64_t> stored;
  absl::Status failure;
  for (int i = 0; i < 1000 && failure.ok(); ++i) {
    std::vector<v1::Measurement> batch(4,
                                       TestMeasurement("c1", TestProblem(64, 64, 64 + i), 10, 50));
    absl::StatusOr<std::vector<int64_t>> ids = store->PutMeasurements(batch);
    if (ids.ok()) {
      stored.insert(stored.end(), ids->begin(), ids->end());
    } else {
      failure = ids.status();
    }
  }
  EXPECT_EQ(failure.code(), absl::StatusCode::kResourceExhausted) << failure;
  EXPECT_THAT(std::string(failure.message()), HasSubstr("disk or database full"));
  ASSERT_FALSE(stored.empty());
  EXPECT_EQ(store->Counts()->measurements, static_cast<int64_t>(stored.size()));
  for (int64_t id : stored) {
    absl::StatusOr<StoredMeasurement> m = store->GetMeasurement(id);
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_EQ(m->measurement.baselines_size(), 3);
    EXPECT_EQ(m->measurement.timings().device().sample_us_size(), 50);
  }
}

TEST(StoreConcurrencyTest, ThreadsShareOneStore) {
  TempDir dir;
  auto store = OpenOrDie(dir.File("anvil.db"));
  ASSERT_TRUE(store->PutCandidate(TestCandidate("c1")).ok());
  constexpr int kThreads = 4;
  constexpr int kPerThread = 40;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&store, t] {
      v1::Problem problem = TestProblem(128, 128, 128 * (t + 1));
      for (int i = 0; i < kPerThread; ++i) {
        if (i % 2 == 0) {
          EXPECT_TRUE(store->PutMeasurement(TestMeasurement("c1", problem, 5 + i)).ok());
        } else {
          std::vector<v1::Measurement> batch(2, TestMeasurement("c1", problem, 5 + i));
          EXPECT_TRUE(store->PutMeasurements(batch).ok());
        }
        EXPECT_TRUE(store->SearchHistory(problem).ok());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(store->Counts()->measurements, kThreads * kPerThread * 3 / 2);
  EXPECT_EQ(*store->CountMeasurements(TestProblem(128, 128, 256)), kPerThread * 3 / 2);
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
