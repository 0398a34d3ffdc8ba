// Store tests: ranking queries (best kernels by figure, verified runs and
// their spread), search history, exemplars and the cuBLASLt cache. Jobs,
// workers, rewards and LLM exchanges: store_jobs_test.cc.
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "store/store.h"
#include "store/store_test_util.h"

namespace anvil {
namespace {

using testing_util::TestMeasurement;
using testing_util::TestProblem;

class StoreQueriesTest : public testing_util::StoreFixture {};

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
