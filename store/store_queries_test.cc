// Store tests: ranking queries, history, exemplars, jobs, workers, rewards,
// LLM exchanges and the cuBLASLt cache.
#include <atomic>

#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "store/store.h"
#include "store/store_test_util.h"

namespace anvil {
namespace {

using ::google::protobuf::util::MessageDifferencer;
using testing_util::TempDir;
using testing_util::TestCandidate;
using testing_util::TestMeasurement;
using testing_util::TestProblem;

class StoreQueriesTest : public ::testing::Test {
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

TEST_F(StoreQueriesTest, BestKernelIsFastestPassedAndVerified) {
  v1::Problem p = TestProblem(4096, 4096, 4096);
  Put(0, p, 10.0, true);
  Put(1, p, 5.0, false);                        // faster but unverified
  Put(2, p, 1.0, true, v1::VERDICT_INCORRECT);  // fastest but failed
  Put(3, p, 8.0, true);
  v1::Build build;
  build.set_candidate_id("cand3");
  build.set_verdict(v1::VERDICT_PASSED);
  ASSERT_TRUE(store_->PutBuild(build).ok());
  absl::StatusOr<std::optional<v1::Kernel>> best = store_->BestKernel(p, "device");
  ASSERT_TRUE(best.ok()) << best.status();
  ASSERT_TRUE(best->has_value());
  EXPECT_EQ((*best)->candidate().id(), "cand3");
  EXPECT_EQ((*best)->build().verdict(), v1::VERDICT_PASSED);
  EXPECT_DOUBLE_EQ((*best)->measurement().timings().device().median_us(), 8.0);
  EXPECT_EQ((*best)->measurement().baselines_size(), 3);
  EXPECT_EQ((*best)->measurement().timings().device().sample_us_size(), 5);
  EXPECT_EQ(store_->BestKernel(p, "bogus").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(store_->BestKernel(TestProblem(1, 1, 1), "device")->has_value());
}

TEST_F(StoreQueriesTest, BestKernelRanksByTheRequestedFigure) {
  v1::Problem p = TestProblem(512, 512, 512);
  v1::Measurement a = TestMeasurement("cand0", p, 10.0);
  a.mutable_timings()->mutable_warm()->set_median_us(30.0);
  a.set_verified(true);
  v1::Measurement b = TestMeasurement("cand1", p, 12.0);
  b.mutable_timings()->mutable_warm()->set_median_us(20.0);
  b.set_verified(true);
  std::vector<v1::Measurement> batch = {a, b};
  ASSERT_TRUE(store_->PutMeasurements(batch).ok());
  EXPECT_EQ((*store_->BestKernel(p, "device"))->candidate().id(), "cand0");
  EXPECT_EQ((*store_->BestKernel(p, "warm"))->candidate().id(), "cand1");
}

TEST_F(StoreQueriesTest, MarkVerifiedPromotes) {
  v1::Problem p = TestProblem(64, 64, 64);
  int64_t slow = Put(0, p, 9.0, true);
  int64_t fast = Put(1, p, 3.0, false);
  EXPECT_EQ((*store_->BestKernel(p, "device"))->candidate().id(), "cand0");
  ASSERT_TRUE(store_->MarkVerified(fast).ok());
  EXPECT_EQ((*store_->BestKernel(p, "device"))->candidate().id(), "cand1");
  EXPECT_NE(slow, fast);
}

TEST_F(StoreQueriesTest, GetKernelAttachesTheRequestedMeasurement) {
  v1::Problem a = TestProblem(640, 640, 640);
  v1::Problem b = TestProblem(320, 320, 320);
  Put(0, a, 7.0, false, v1::VERDICT_PASSED, 100);
  Put(0, a, 9.0, true, v1::VERDICT_PASSED, 200);
  Put(0, b, 3.0, false, v1::VERDICT_PASSED, 300);
  absl::StatusOr<v1::Kernel> on_a = store_->GetKernel("cand0", a);
  ASSERT_TRUE(on_a.ok()) << on_a.status();
  EXPECT_EQ(on_a->candidate().id(), "cand0");
  EXPECT_DOUBLE_EQ(on_a->measurement().timings().device().median_us(), 9.0);  // verified first
  absl::StatusOr<v1::Kernel> any = store_->GetKernel("cand0", std::nullopt);
  EXPECT_DOUBLE_EQ(any->measurement().timings().device().median_us(), 9.0);
  absl::StatusOr<v1::Kernel> none = store_->GetKernel("cand1", a);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->has_measurement());
  EXPECT_EQ(store_->GetKernel("nope", a).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(StoreQueriesTest, GetKernelOfAJobAttachesThatJobsMeasurement) {
  v1::Problem a = TestProblem(640, 640, 640);
  ASSERT_TRUE(store_->CreateJob("job-1", v1::OptimizeKernelRequest()).ok());
  ASSERT_TRUE(store_->CreateJob("job-2", v1::OptimizeKernelRequest()).ok());
  v1::Measurement m = TestMeasurement("cand0", a, 7.0);
  m.set_verified(true);
  ASSERT_TRUE(store_->PutMeasurement(m, "job-1").ok());
  m.mutable_timings()->mutable_device()->set_median_us(8.0);
  m.set_verified(false);
  ASSERT_TRUE(store_->PutMeasurement(m, "job-2").ok());
  m.mutable_timings()->mutable_device()->set_median_us(9.0);
  m.set_verified(true);
  ASSERT_TRUE(store_->PutMeasurement(m, "job-2").ok());
  EXPECT_DOUBLE_EQ(store_->GetKernel("cand0", a)->measurement().timings().device().median_us(), 7.0);
  absl::StatusOr<v1::Kernel> two = store_->GetKernel("cand0", a, "device", "job-2");
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_DOUBLE_EQ(two->measurement().timings().device().median_us(), 9.0);  // verified first
  absl::StatusOr<v1::Kernel> three = store_->GetKernel("cand0", a, "device", "job-3");
  ASSERT_TRUE(three.ok()) << three.status();
  EXPECT_FALSE(three->has_measurement());
}

TEST_F(StoreQueriesTest, ListBestKernelsOnePerProblemWithFilters) {
  v1::Problem a = TestProblem(1024, 1024, 1024);
  v1::Problem b = TestProblem(2048, 1024, 1024, v1::LAYOUT_NN);
  v1::Problem c = TestProblem(1024, 1024, 1024, v1::LAYOUT_NT, "H200-SXM-141GB");
  v1::Problem d = TestProblem(8, 8, 8);  // only unverified results
  Put(0, a, 7.0, true);
  Put(1, a, 6.0, true);
  Put(2, b, 9.0, true);
  Put(3, c, 4.0, true);
  Put(4, d, 1.0, false);
  absl::StatusOr<std::vector<v1::Kernel>> all =
      store_->ListBestKernels("", v1::LAYOUT_UNSPECIFIED, "device", 0);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].candidate().id(), "cand1");  // H100 1024 nt
  EXPECT_EQ((*all)[1].candidate().id(), "cand2");  // H100 2048 nn
  EXPECT_EQ((*all)[2].candidate().id(), "cand3");  // H200
  auto h100 = store_->ListBestKernels("H100-SXM5-80GB", v1::LAYOUT_UNSPECIFIED, "device", 10);
  EXPECT_EQ(h100->size(), 2u);
  auto nn = store_->ListBestKernels("", v1::LAYOUT_NN, "device", 10);
  ASSERT_EQ(nn->size(), 1u);
  EXPECT_EQ((*nn)[0].measurement().problem().layout(), v1::LAYOUT_NN);
  EXPECT_EQ(store_->ListBestKernels("", v1::LAYOUT_UNSPECIFIED, "device", 1)->size(), 1u);
}

TEST_F(StoreQueriesTest, SearchHistoryIsInTimeOrder) {
  v1::Problem p = TestProblem(256, 256, 256);
  ASSERT_TRUE(store_->CreateJob("job-1", v1::OptimizeKernelRequest()).ok());
  Put(0, p, 5.0, false, v1::VERDICT_PASSED, 3000);
  Put(1, p, 6.0, false, v1::VERDICT_CRASHED, 1000);
  v1::Measurement in_job = TestMeasurement("cand2", p, 4.0);
  in_job.set_measured_at_unix_ms(2000);
  ASSERT_TRUE(store_->PutMeasurement(in_job, "job-1").ok());
  absl::StatusOr<std::vector<StoredMeasurement>> history = store_->SearchHistory(p);
  ASSERT_TRUE(history.ok()) << history.status();
  ASSERT_EQ(history->size(), 3u);
  EXPECT_EQ((*history)[0].measurement.candidate_id(), "cand1");
  EXPECT_EQ((*history)[1].measurement.candidate_id(), "cand2");
  EXPECT_EQ((*history)[1].job_id, "job-1");
  EXPECT_EQ((*history)[2].measurement.candidate_id(), "cand0");
  EXPECT_EQ((*history)[2].measurement.baselines_size(), 3);
  EXPECT_EQ((*history)[2].measurement.timings().device().sample_us_size(), 0);
  auto job_history = store_->SearchHistory(p, std::string("job-1"));
  ASSERT_EQ(job_history->size(), 1u);
  EXPECT_EQ((*job_history)[0].measurement.candidate_id(), "cand2");
}

TEST_F(StoreQueriesTest, ExemplarsAreDistinctFastestAndSlowestPassed) {
  v1::Problem p = TestProblem(333, 444, 555);
  for (int i = 0; i < 6; ++i) Put(i, p, 10.0 + i, false);
  Put(0, p, 50.0, false);                       // cand0 again: slow run of the fastest
  Put(6, p, 0.5, true, v1::VERDICT_INCORRECT);  // failed: ignored
  Put(7, p, 99.0, true, v1::VERDICT_TIMEOUT);   // failed: ignored
  absl::StatusOr<ExemplarSet> set = store_->Exemplars(p, "device", 2);
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_EQ(set->fastest.size(), 2u);
  ASSERT_EQ(set->slowest.size(), 2u);
  EXPECT_EQ(set->fastest[0].candidate.id(), "cand0");
  EXPECT_DOUBLE_EQ(set->fastest[0].measurement.measurement.timings().device().median_us(), 10.0);
  EXPECT_EQ(set->fastest[1].candidate.id(), "cand1");
  EXPECT_EQ(set->slowest[0].candidate.id(), "cand5");
  EXPECT_EQ(set->slowest[1].candidate.id(), "cand4");
  EXPECT_FALSE(set->slowest[0].candidate.source().empty());
  absl::StatusOr<ExemplarSet> big = store_->Exemplars(p, "device", 10);
  EXPECT_EQ(big->fastest.size() + big->slowest.size(), 6u);  // no candidate twice
}

TEST_F(StoreQueriesTest, JobsLifecycle) {
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

TEST_F(StoreQueriesTest, Workers) {
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

TEST_F(StoreQueriesTest, RewardsAndLlmExchanges) {
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

TEST_F(StoreQueriesTest, LlmExchangesKeepTheirSamplesRewardsAndAdvantages) {
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
                       std::nullopt, ""});
  e.samples.push_back({0, 1, "no idea", "", "no_code", "the answer has no code block", -10.0,
                       std::nullopt, "rejected"});
  absl::StatusOr<int64_t> id = store_->PutLlmExchange(e);
  ASSERT_TRUE(id.ok()) << id.status();
  LlmSample outcome;
  outcome.reward = 0.25;
  outcome.advantage = 1.0;
  outcome.reward_kind = "speedup";
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
  EXPECT_EQ(g.samples[0].advantage, 1.0);
  EXPECT_EQ(g.samples[1].status, "no_code");
  EXPECT_EQ(g.samples[1].reward, -10.0);
  EXPECT_FALSE(g.samples[1].advantage.has_value());
  LlmExchange bad = e;
  bad.messages_json = "{oops";
  EXPECT_FALSE(store_->PutLlmExchange(bad).ok());
  EXPECT_EQ(store_->ListLlmExchanges("job-s")->size(), 1u);  // nothing half-stored
}

TEST_F(StoreQueriesTest, LtAlgoCache) {
  v1::Problem p = TestProblem(4096, 1024, 512);
  EXPECT_FALSE(store_->GetLtAlgo(p, "13.1.0")->has_value());
  std::string algo(64, '\0');
  for (int i = 0; i < 64; ++i) algo[i] = static_cast<char>(i * 7);
  ASSERT_TRUE(store_->PutLtAlgo(p, "13.1.0", {algo, 0}).ok());
  auto got = store_->GetLtAlgo(p, "13.1.0");
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->algo, algo);
  EXPECT_EQ((*got)->measured_unix_ms, 1'000'000);
  EXPECT_FALSE(store_->GetLtAlgo(p, "13.2.0")->has_value());
  std::string other(64, 'x');
  ASSERT_TRUE(store_->PutLtAlgo(p, "13.1.0", {other, 5}).ok());
  EXPECT_EQ((*store_->GetLtAlgo(p, "13.1.0"))->algo, other);
}

// A choice tuned in one regime is kept beside the others, not in their place.
TEST_F(StoreQueriesTest, LtAlgoCacheKeepsOneChoicePerFigure) {
  v1::Problem p = TestProblem(1, 4096, 4096);
  ASSERT_TRUE(store_->PutLtAlgo(p, "130100", {std::string(64, 'd'), 0, "device"}).ok());
  ASSERT_TRUE(store_->PutLtAlgo(p, "130100", {std::string(64, 'h'), 0, "graph-hot"}).ok());
  ASSERT_TRUE(store_->PutLtAlgo(p, "130100", {std::string(64, 'c'), 0, "graph-cold"}).ok());
  EXPECT_EQ(store_->PutLtAlgo(p, "130100", {std::string(64, 'x'), 0, "fastest"}).code(),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<std::vector<LtAlgo>> all = store_->GetLtAlgos(p, "130100");
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*store_->GetLtAlgo(p, "130100", "graph-cold"))->algo, std::string(64, 'c'));
  EXPECT_EQ((*store_->GetLtAlgo(p, "130100", "graph-hot"))->algo, std::string(64, 'h'));
  EXPECT_EQ((*store_->GetLtAlgo(p, "130100"))->algo, std::string(64, 'd'));
}

// The graph figures round-trip and rank; a measurement without them (a call
// that cannot be captured) never wins by a graph figure, and says why.
TEST_F(StoreQueriesTest, GraphFiguresRankAndAbsentOnesNeverWin) {
  v1::Problem p = TestProblem(1000, 1000, 1000);
  v1::Measurement a = TestMeasurement("cand0", p, 10.0);  // graph-cold 15
  a.set_verified(true);
  v1::Measurement b = TestMeasurement("cand1", p, 12.0);  // graph-cold 18, but...
  b.mutable_timings()->mutable_graph_cold()->set_median_us(14.0);  // ...faster cold
  b.set_verified(true);
  v1::Measurement c = TestMeasurement("cand2", p, 1.0);  // fastest by device, no graph figures
  c.mutable_timings()->clear_graph_cold();
  c.mutable_timings()->clear_graph_hot();
  c.set_graph_note("candidate cannot be captured in a CUDA graph: cudaErrorStreamCaptureUnsupported");
  c.set_verified(true);
  std::vector<v1::Measurement> batch = {a, b, c};
  ASSERT_TRUE(store_->PutMeasurements(batch).ok());
  EXPECT_EQ((*store_->BestKernel(p, "graph-cold"))->candidate().id(), "cand1");
  EXPECT_EQ((*store_->BestKernel(p, "graph-hot"))->candidate().id(), "cand0");
  EXPECT_EQ((*store_->BestKernel(p, "device"))->candidate().id(), "cand2");
  std::optional<v1::Kernel> best = *store_->BestKernel(p, "graph-cold");
  EXPECT_EQ(best->measurement().timings().graph_calls_cold(), 120);
  EXPECT_EQ(best->measurement().timings().graph_cold_sets(), 24);
  EXPECT_EQ(best->measurement().timings().graph_cold().sample_us_size(), 5);
  EXPECT_EQ(best->measurement().baselines(0).timings().graph_cold().median_us(), 1.6 * 12.0);
  EXPECT_THAT((*store_->BestKernel(p, "device"))->measurement().graph_note(),
              testing::HasSubstr("cannot be captured"));
}

// Each verified run of a winner is a runner process of its own; the kernel
// carries the median and range of their speedups, per figure.
TEST_F(StoreQueriesTest, KernelCarriesTheSpreadOfItsVerifiedRuns) {
  v1::Problem p = TestProblem(2048, 2048, 2048);
  std::vector<v1::Measurement> runs;
  for (double base : {1.5, 1.7, 1.6}) {  // graph-cold speedups of the three runs
    v1::Measurement m = TestMeasurement("cand4", p, 10.0);
    for (v1::Baseline& b : *m.mutable_baselines()) {
      b.mutable_timings()->mutable_graph_cold()->set_median_us(base * 10.0);
    }
    m.mutable_timings()->mutable_graph_cold()->set_median_us(10.0);
    m.set_verified(true);
    runs.push_back(m);
  }
  v1::Measurement unverified = TestMeasurement("cand4", p, 10.0);  // not a verified run
  unverified.mutable_timings()->mutable_graph_cold()->set_median_us(1.0);
  runs.push_back(unverified);
  ASSERT_TRUE(store_->PutMeasurements(runs).ok());
  std::optional<v1::Kernel> k = *store_->BestKernel(p, "graph-cold");
  ASSERT_TRUE(k.has_value());
  const v1::SpeedupSpread* cold = nullptr;
  for (const v1::SpeedupSpread& s : k->spreads()) {
    if (s.figure() == "graph-cold") cold = &s;
  }
  ASSERT_NE(cold, nullptr);
  EXPECT_EQ(cold->runs(), 3);
  EXPECT_NEAR(cold->median(), 1.6, 1e-9);
  EXPECT_NEAR(cold->min(), 1.5, 1e-9);
  EXPECT_NEAR(cold->max(), 1.7, 1e-9);
}

}  // namespace
}  // namespace anvil

namespace anvil {
namespace {

class StoreActivityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StoreOptions options;
    options.now_unix_ms = [this] { return clock_; };
    absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(dir_.File("anvil.db"), options);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    for (int i = 0; i < 4; ++i) {
      ASSERT_TRUE(store_->PutCandidate(testing_util::TestCandidate(absl::StrCat("cand", i))).ok());
    }
  }
  testing_util::TempDir dir_;
  int64_t clock_ = 1'000'000;
  std::unique_ptr<Store> store_;
};

TEST_F(StoreActivityTest, CountsAJobsMeasurementsAndBestSpeedupPerProblem) {
  using testing_util::TestMeasurement;
  using testing_util::TestProblem;
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
