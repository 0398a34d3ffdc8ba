// Status page tests: the model of a running job, its workers, leases and
// winners; the HTTP answers (token, methods, paths). The page in a browser,
// updating as the job progresses: report/browser_test.py.
#include "report/status.h"

#include <stdlib.h>

#include <filesystem>

#include "gtest/gtest.h"
#include "report/report_test_store.h"
#include "report/test_store_fixture.h"

namespace anvil::report {
namespace {

using nlohmann::json;

class StatusTest : public testing::TestStoreFixture {
 protected:
  StatusSnapshot Snapshot() {
    StatusSnapshot s;
    s.now_unix_ms = clock_ + 1000;
    s.leases.push_back({"worker-test-1", 0, testing::kTestJob, "sm90_wgmma_128x256x64", clock_, clock_ + 30000});
    return s;
  }
};

TEST_F(StatusTest, ModelShowsTheRunningJobWorkersLeasesAndWinners) {
  absl::StatusOr<json> m = BuildStatusModel(*store_, Snapshot());
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ((*m)["jobs"].size(), 1u);
  const json& job = (*m)["jobs"][0];
  EXPECT_EQ(job["state"], "running");
  EXPECT_EQ(job["measurements"], 75);
  EXPECT_EQ(job["failed_builds"], 4);
  EXPECT_GT(job["progress"].get<double>(), 0.0);
  EXPECT_LE(job["progress"].get<double>(), 1.0);
  ASSERT_EQ(job["problems"].size(), 3u);
  EXPECT_NEAR(job["problems"][0]["best_speedup"].get<double>(), 1.06 * 0.99, 1e-6);
  const json& worker = (*m)["workers"][0];
  EXPECT_EQ(worker["hostname"], "gpu-node-1");
  EXPECT_TRUE(worker["healthy"].get<bool>());
  EXPECT_EQ(worker["gpus"][0]["lease"]["candidate"], "sm90_wgmma_128x256x64");
  EXPECT_EQ((*m)["winners"].size(), 3u);  // the verified re-measurements

  StatusSnapshot late = Snapshot();
  late.now_unix_ms += 120'000;  // two minutes without a heartbeat
  EXPECT_FALSE((*BuildStatusModel(*store_, late))["workers"][0]["healthy"].get<bool>());
}

TEST_F(StatusTest, LeasesAndQuarantineComeFromTheFleetsStore) {
  TaskRecord measure;
  measure.id = "task-m";
  measure.kind = "measure";
  measure.job_id = testing::kTestJob;
  measure.candidate_id = "cand-0123";
  measure.gpu = testing::kTestGpu;
  measure.payload = "m";
  TaskRecord build = measure;
  build.id = "task-b";
  build.kind = "build";
  build.gpu = "";
  build.payload = "b";
  ASSERT_TRUE(store_->EnqueueTask(measure).ok());
  ASSERT_TRUE(store_->EnqueueTask(build).ok());
  TaskLeaseRequest gpu_slot{"worker-test-1", 0, std::string(testing::kTestGpu), false, 30000, "", false};
  TaskLeaseRequest build_slot{"worker-test-1", -1, "", true, 30000, "", false};
  for (const TaskLeaseRequest& slot : {gpu_slot, build_slot}) {
    absl::StatusOr<std::optional<TaskRecord>> lease = store_->LeaseTask(slot);
    ASSERT_TRUE(lease.ok()) << lease.status();
    ASSERT_TRUE(lease->has_value()) << "nothing leased for slot " << slot.slot;
  }
  StatusSnapshot s;
  s.now_unix_ms = clock_ + 1000;
  json m = *BuildStatusModel(*store_, s);
  const json& worker = m["workers"][0];
  EXPECT_EQ(worker["build_leases"], 1);
  EXPECT_EQ(worker["build_slots"], 2);
  ASSERT_FALSE(worker["gpus"][0]["lease"].is_null()) << worker.dump();
  EXPECT_EQ(worker["gpus"][0]["lease"]["candidate"], "cand-0123");
  EXPECT_EQ(worker["gpus"][0]["lease"]["job"], testing::kTestJob);
  EXPECT_TRUE(worker["healthy"].get<bool>());
  ASSERT_TRUE(store_->RecordWorkerRun("worker-test-1", "measure", 1.0, true, "driver error", 1).ok());
  const json q = BuildStatusModel(*store_, s)->at("workers")[0];
  EXPECT_FALSE(q["healthy"].get<bool>());
  EXPECT_EQ(q["quarantine"], "driver error");
}

TEST_F(StatusTest, ProgressShowsOnTheNextPoll) {
  StatusSnapshot s = Snapshot();
  const double before = (*BuildStatusModel(*store_, s))["jobs"][0]["problems"][1]["best_speedup"];
  ASSERT_TRUE(testing::ProgressTestJob(*store_, clock_, 1).ok());
  json after = *BuildStatusModel(*store_, s);
  EXPECT_GT(after["jobs"][0]["problems"][1]["best_speedup"].get<double>(), before);
  EXPECT_EQ(after["jobs"][0]["measurements"], 76);
}

TEST_F(StatusTest, HttpAnswersNeedTheTokenAndAreReadOnly) {
  auto snap = [this] { return Snapshot(); };
  StatusRequest r;
  r.path = "/metrics";
  EXPECT_FALSE(HandleStatusRequest(r, *store_, snap, nullptr).handled);
  r.path = "/status";
  StatusResponse page = HandleStatusRequest(r, *store_, snap, nullptr);
  EXPECT_EQ(page.code, 200);
  EXPECT_NE(page.content_type.find("text/html"), std::string::npos);
  EXPECT_NE(page.body.find("'.json' + location.search"), std::string::npos);  // polls /status.json
  EXPECT_EQ(HandleStatusRequest(r, *store_, snap, BearerToken("s3cret")).code, 401);
  r.query = "token=s3cret";
  EXPECT_EQ(HandleStatusRequest(r, *store_, snap, BearerToken("s3cret")).code, 200);
  r.query = "a=1&token=s3%63ret";  // escaped in the URL
  EXPECT_EQ(HandleStatusRequest(r, *store_, snap, BearerToken("s3cret")).code, 200);
  r.query = "token=s3cre";
  EXPECT_EQ(HandleStatusRequest(r, *store_, snap, BearerToken("s3cret")).code, 401);
  r.query.clear();
  r.path = "/status.json";
  r.authorization = "Bearer s3cret";
  StatusResponse data = HandleStatusRequest(r, *store_, snap, BearerToken("s3cret"));
  ASSERT_EQ(data.code, 200);
  EXPECT_EQ(data.content_type, "application/json");
  EXPECT_EQ(json::parse(data.body)["jobs"][0]["id"], testing::kTestJob);
  r.method = "POST";
  EXPECT_EQ(HandleStatusRequest(r, *store_, snap, BearerToken("s3cret")).code, 405);
}

}  // namespace
}  // namespace anvil::report
