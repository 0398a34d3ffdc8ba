// Store tests: round trips of every row kind, atomic batches, full disk and
// concurrent writers. Opening and migrating files: store_open_test.cc;
// queries: store_queries_test.cc; jobs, workers, rewards and LLM exchanges:
// store_jobs_test.cc.
#include "store/store.h"

#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "store/store_test_util.h"

namespace anvil {
namespace {

using ::google::protobuf::util::MessageDifferencer;
using ::testing::HasSubstr;
using testing_util::OpenOrDie;
using testing_util::RawInt;
using testing_util::TempDir;
using testing_util::TestCandidate;
using testing_util::TestMeasurement;
using testing_util::TestProblem;

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
  m.set_fidelity(v1::FIDELITY_SCREEN);
  v1::Measurement failed;  // no timings at all: stays absent
  failed.set_fidelity(v1::FIDELITY_FULL);
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

}  // namespace
}  // namespace anvil
