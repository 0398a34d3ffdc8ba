// Store tests: jobs (lifecycle, progress, activity), fleet workers, rewards
// and LLM exchanges with their samples. Ranking queries: store_queries_test.cc.
#include <vector>

#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "store/store.h"
#include "store/store_test_util.h"

namespace anvil {
namespace {

using ::google::protobuf::util::MessageDifferencer;
using testing_util::TestMeasurement;
using testing_util::TestProblem;

class StoreJobsTest : public testing_util::StoreFixture {};

TEST_F(StoreJobsTest, JobsLifecycle) {
  v1::OptimizeKernelRequest request;
  *request.add_problems() = TestProblem(128, 128, 128);
  request.set_proposer("llm");
  request.mutable_budget()->set_max_candidates(64);
  ASSERT_TRUE(store_->CreateJob("job-a", request).ok());
  EXPECT_EQ(store_->CreateJob("job-a", request).code(), absl::StatusCode::kAlreadyExists);
  clock_ += 10;
  ASSERT_TRUE(store_->CreateJob("job-b", v1::OptimizeKernelRequest()).ok());
  EXPECT_TRUE(MessageDifferencer::Equals(*store_->GetJobRequest("job-a"), request));
  v1::ProblemProgress progress;
  *progress.mutable_problem() = TestProblem(128, 128, 128);
  progress.set_candidates_tried(3);
  ASSERT_TRUE(store_->UpdateJobProblem("job-a", progress).ok());
  progress.set_candidates_tried(4);
  progress.set_best_candidate_id("cand1");
  progress.set_best_us(5.0);
  progress.set_best_baseline_us(6.0);
  clock_ += 10;
  ASSERT_TRUE(store_->UpdateJobProblem("job-a", progress).ok());
  ASSERT_TRUE(store_->UpdateJobState("job-a", v1::JOB_STATE_RUNNING).ok());
  absl::StatusOr<v1::Job> job = store_->GetJob("job-a");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(job->created_unix_ms(), 1'000'000);
  EXPECT_EQ(job->updated_unix_ms(), 1'000'020);
  ASSERT_EQ(job->problems_size(), 1);
  EXPECT_EQ(job->problems(0).candidates_tried(), 4);
  EXPECT_EQ(job->problems(0).best_candidate_id(), "cand1");
  EXPECT_DOUBLE_EQ(job->problems(0).speedup(), 1.2);
  ASSERT_TRUE(store_->UpdateJobState("job-b", v1::JOB_STATE_FAILED, "worker lost").ok());
  EXPECT_EQ(store_->GetJob("job-b")->error(), "worker lost");
  auto jobs = store_->ListJobs();
  ASSERT_EQ(jobs->size(), 2u);
  EXPECT_EQ((*jobs)[0].id(), "job-b");  // newest first
  auto running = store_->ListJobs(10, v1::JOB_STATE_RUNNING);
  ASSERT_EQ(running->size(), 1u);
  EXPECT_EQ((*running)[0].id(), "job-a");
  EXPECT_EQ(store_->GetJob("nope").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->UpdateJobState("nope", v1::JOB_STATE_CANCELLED).code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->UpdateJobProblem("nope", progress).code(), absl::StatusCode::kNotFound);
}

TEST_F(StoreJobsTest, Workers) {
  WorkerRecord w;
  w.id = "w1";
  w.hostname = "gpu-node-1";
  v1::GpuInfo gpu;
  gpu.set_ordinal(0);
  gpu.set_uuid("GPU-abc");
  gpu.set_model("H100-SXM5-80GB");
  gpu.set_memory_bytes(85899345920);
  w.gpus = {gpu, gpu};
  w.build_jobs = 8;
  ASSERT_TRUE(store_->UpsertWorker(w).ok());
  clock_ += 500;
  w.state = "draining";
  ASSERT_TRUE(store_->UpsertWorker(w).ok());
  clock_ += 500;
  ASSERT_TRUE(store_->RecordHeartbeat("w1").ok());
  EXPECT_EQ(store_->RecordHeartbeat("w2").code(), absl::StatusCode::kNotFound);
  absl::StatusOr<std::vector<WorkerRecord>> workers = store_->ListWorkers();
  ASSERT_TRUE(workers.ok()) << workers.status();
  ASSERT_EQ(workers->size(), 1u);
  const WorkerRecord& got = (*workers)[0];
  EXPECT_EQ(got.registered_unix_ms, 1'000'000);
  EXPECT_EQ(got.last_heartbeat_unix_ms, 1'001'000);
  EXPECT_EQ(got.state, "draining");
  ASSERT_EQ(got.gpus.size(), 2u);
  EXPECT_TRUE(MessageDifferencer::Equals(got.gpus[1], gpu));
}

TEST_F(StoreJobsTest, RewardsAndLlmExchanges) {
  v1::Problem p = TestProblem(96, 96, 96);
  ASSERT_TRUE(store_->CreateJob("job-r", v1::OptimizeKernelRequest()).ok());
  int64_t m = Put(0, p, 3.0, false);
  Reward speed;
  speed.measurement_id = m;
  speed.candidate_id = "cand0";
  speed.problem = p;
  speed.job_id = "job-r";
  speed.value = 1.25;
  speed.kind = "speedup";
  speed.figure = "device";
  speed.details_json = R"({"baseline":"cublaslt_auto"})";
  Reward broken;
  broken.candidate_id = "cand1";
  broken.job_id = "job-r";
  broken.value = -1;
  broken.kind = "compile_error";
  ASSERT_TRUE(store_->PutReward(speed).ok());
  ASSERT_TRUE(store_->PutReward(broken).ok());
  Reward bad_json = broken;
  bad_json.details_json = "{not json";
  EXPECT_EQ(store_->PutReward(bad_json).status().code(), absl::StatusCode::kInvalidArgument);
  auto rewards = store_->ListRewards("job-r");
  ASSERT_EQ(rewards->size(), 2u);
  EXPECT_EQ((*rewards)[0].measurement_id, m);
  EXPECT_TRUE((*rewards)[0].problem.has_value());
  EXPECT_EQ((*rewards)[0].details_json, speed.details_json);
  EXPECT_EQ((*rewards)[1].measurement_id, 0);
  EXPECT_FALSE((*rewards)[1].problem.has_value());

  LlmExchange e;
  e.job_id = "job-r";
  e.problem = p;
  e.candidate_id = "cand0";
  e.model = "qwen3";
  e.endpoint = "http://localhost:8000/v1";
  e.prompt = "make it faster";
  e.response = "```cuda\n...\n```";
  e.prompt_tokens = 1200;
  e.completion_tokens = 900;
  e.latency_ms = 8100.5;
  ASSERT_TRUE(store_->PutLlmExchange(e).ok());
  e.error = "timeout";
  e.problem.reset();
  e.candidate_id.clear();
  ASSERT_TRUE(store_->PutLlmExchange(e).ok());
  auto exchanges = store_->ListLlmExchanges("job-r");
  ASSERT_EQ(exchanges->size(), 2u);
  EXPECT_EQ((*exchanges)[0].prompt, "make it faster");
  EXPECT_EQ((*exchanges)[0].completion_tokens, 900);
  EXPECT_EQ((*exchanges)[0].created_unix_ms, 1'000'000);
  EXPECT_TRUE((*exchanges)[0].problem.has_value());
  EXPECT_EQ((*exchanges)[1].error, "timeout");
  EXPECT_FALSE((*exchanges)[1].problem.has_value());
}

TEST_F(StoreJobsTest, LlmExchangesKeepTheirSamplesRewardsAndAdvantages) {
  ASSERT_TRUE(store_->CreateJob("job-s", v1::OptimizeKernelRequest()).ok());
  LlmExchange e;
  e.job_id = "job-s";
  e.model = "smollm2";
  e.endpoint = "POST http://127.0.0.1:8080/v1/chat/completions";
  e.system_prompt = "you write kernels";
  e.messages_json = R"([{"role":"user","content":"faster"}])";
  e.prompt = "faster";
  e.prompt_version = "2026-11-26";
  e.recipe = "contrast";
  e.cost_usd = 0.0125;
  e.http_requests = 3;
  e.samples.push_back({0, 0, "```cuda ...```", "cand0", "proposed", "", std::nullopt,
                       std::nullopt, "", ""});
  e.samples.push_back({0, 1, "no idea", "", "no_code", "the answer has no code block", -10.0,
                       std::nullopt, "rejected", ""});
  absl::StatusOr<int64_t> id = store_->PutLlmExchange(e);
  ASSERT_TRUE(id.ok()) << id.status();
  LlmSample outcome;
  outcome.reward = 0.25;
  outcome.advantage = 1.0;
  outcome.reward_kind = "speedup";
  outcome.reward_fidelity = "screen";
  ASSERT_TRUE(store_->SetLlmSampleOutcome(*id, 0, outcome).ok());
  EXPECT_EQ(store_->SetLlmSampleOutcome(*id, 7, outcome).code(), absl::StatusCode::kNotFound);
  auto got = store_->ListLlmExchanges("job-s");
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 1u);
  const LlmExchange& g = (*got)[0];
  EXPECT_EQ(g.recipe, "contrast");
  EXPECT_EQ(g.prompt_version, "2026-11-26");
  EXPECT_DOUBLE_EQ(g.cost_usd, 0.0125);
  EXPECT_EQ(g.http_requests, 3);
  EXPECT_EQ(g.messages_json, e.messages_json);
  ASSERT_EQ(g.samples.size(), 2u);
  EXPECT_EQ(g.samples[0].candidate_id, "cand0");  // kept: the outcome named none
  EXPECT_EQ(g.samples[0].reward, 0.25);
  EXPECT_EQ(g.samples[0].reward_fidelity, "screen");
  EXPECT_EQ(g.samples[1].reward_fidelity, "");
  EXPECT_EQ(g.samples[0].advantage, 1.0);
  EXPECT_EQ(g.samples[1].status, "no_code");
  EXPECT_EQ(g.samples[1].reward, -10.0);
  EXPECT_FALSE(g.samples[1].advantage.has_value());
  LlmExchange bad = e;
  bad.messages_json = "{oops";
  EXPECT_FALSE(store_->PutLlmExchange(bad).ok());
  EXPECT_EQ(store_->ListLlmExchanges("job-s")->size(), 1u);  // nothing half-stored
}

class StoreActivityTest : public testing_util::StoreFixture {};

TEST_F(StoreActivityTest, CountsAJobsMeasurementsAndBestSpeedupPerProblem) {
  v1::Problem big = TestProblem(4096, 4096, 4096), small = TestProblem(16, 4096, 4096);
  ASSERT_TRUE(store_->CreateJob("job-1", v1::OptimizeKernelRequest()).ok());
  ASSERT_TRUE(store_->CreateJob("job-2", v1::OptimizeKernelRequest()).ok());
  clock_ += 10;
  v1::Build build;
  build.set_candidate_id("cand0");
  build.set_verdict(v1::VERDICT_COMPILE_ERROR);
  ASSERT_TRUE(store_->PutBuild(build).ok());
  v1::Measurement fast = TestMeasurement("cand1", small, 10.0);  // baselines at 11 us
  v1::Measurement slow = TestMeasurement("cand2", small, 20.0);
  v1::Measurement wrong = TestMeasurement("cand3", small, 1.0);
  wrong.set_verdict(v1::VERDICT_INCORRECT);
  v1::Measurement other = TestMeasurement("cand1", big, 100.0);
  ASSERT_TRUE(store_->PutMeasurements(std::vector<v1::Measurement>{fast, slow, wrong}, "job-1").ok());
  ASSERT_TRUE(store_->PutMeasurement(other, "job-1").ok());
  ASSERT_TRUE(store_->PutMeasurement(fast, "job-2").ok());
  absl::StatusOr<JobActivity> a = store_->GetJobActivity("job-1", "device");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->measurements, 4);
  EXPECT_EQ(a->builds, 1);
  EXPECT_EQ(a->failed_builds, 1);
  ASSERT_EQ(a->problems.size(), 2u);
  EXPECT_EQ(a->problems[0].problem.shape().m(), 16);  // first measured first
  EXPECT_EQ(a->problems[0].measurements, 3);
  EXPECT_EQ(a->problems[0].candidates, 3);
  EXPECT_EQ(a->problems[0].failed, 1);
  EXPECT_NEAR(a->problems[0].best_speedup, 1.1, 1e-9);  // the failed 1 us row does not count
  EXPECT_NEAR(a->problems[1].best_speedup, 1.1, 1e-9);
  EXPECT_EQ(store_->GetJobActivity("job-9", "device").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->GetJobActivity("job-1", "fastest").status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<std::vector<v1::Problem>> problems = store_->ListProblems("H100-SXM5-80GB");
  ASSERT_TRUE(problems.ok()) << problems.status();
  ASSERT_EQ(problems->size(), 2u);
  EXPECT_EQ((*problems)[0].shape().m(), 16);
  EXPECT_TRUE(store_->ListProblems("H200")->empty());
  EXPECT_EQ(store_->ListProblems("")->size(), 2u);
}

}  // namespace
}  // namespace anvil
