// Measure callbacks on a real store: the reward callback hands each
// observation its rewards and their kinds (a failed build's too), and the
// exchange callback keeps what a proposer handed over (an exchange, then its
// samples' outcomes, by the proposer's own keys).
#include "server/measure_callbacks.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "proto/candidate.h"
#include "proto/problem.h"

namespace anvil {
namespace {

v1::Candidate Candidate(const std::string& tag) {
  v1::Candidate c;
  c.set_source("// kernel " + tag + "\n");
  c.set_layout(v1::LAYOUT_NT);
  c.set_arch("sm_90a");
  AssignCandidateId(c);
  c.set_name(tag);
  return c;
}

class MeasureCallbacksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string path = ::testing::TempDir() + "/measure_callbacks_test_" +
                             ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".db";
    std::filesystem::remove(path);
    store_ = std::move(*Store::Open(path));
    ASSERT_TRUE(store_->CreateJob("job-1", v1::OptimizeKernelRequest()).ok());
    round_.job_id = "job-1";
    round_.figure = "device";
    round_.problems = &problems_;
    round_.observations = &observations_;
  }

  std::unique_ptr<Store> store_;
  std::vector<ProblemView> problems_;
  std::vector<Observation> observations_;
  MeasuredRound round_;
};

TEST_F(MeasureCallbacksTest, RewardsAndTheirKindsReachTheObservations) {
  const v1::Problem p = MakeProblem("H100-SXM5-80GB", "sm_90a", MakeShape(64, 64, 64), v1::LAYOUT_NT);
  Observation measured;
  measured.proposal.candidate = Candidate("fast");
  measured.outcome = Outcome::kMeasured;
  measured.measured_on = {0, 0};
  v1::Measurement& m = measured.measurements.emplace_back();
  *m.mutable_problem() = p;
  m.set_candidate_id(measured.proposal.candidate.id());
  m.set_verdict(v1::VERDICT_PASSED);
  m.mutable_timings()->mutable_device()->set_median_us(5);
  v1::Baseline* b = m.add_baselines();
  b->set_name("cublas");
  b->mutable_timings()->mutable_device()->set_median_us(10);
  v1::Measurement& wrong = measured.measurements.emplace_back(m);
  wrong.set_verdict(v1::VERDICT_INCORRECT);
  Observation broken;
  broken.proposal.candidate = Candidate("broken");
  broken.outcome = Outcome::kBuildFailed;
  broken.build.emplace().set_verdict(v1::VERDICT_COMPILE_ERROR);
  measured.build.emplace().set_verdict(v1::VERDICT_PASSED);
  for (Observation* o : {&measured, &broken}) o->build->set_candidate_id(o->proposal.candidate.id());
  observations_ = {measured, broken};
  const absl::Status stored = MakeStoreCallback(*store_)->Apply(round_);  // what rewards refer to
  ASSERT_TRUE(stored.ok()) << stored;
  const absl::Status st = MakeRewardCallback(*store_)->Apply(round_);
  ASSERT_TRUE(st.ok()) << st;
  ASSERT_EQ(observations_[0].rewards.size(), 2u);
  EXPECT_DOUBLE_EQ(observations_[0].rewards[0], 1.0);  // log2(10 / 5)
  EXPECT_LT(observations_[0].rewards[1], 0);
  EXPECT_EQ(observations_[0].reward_kinds, (std::vector<std::string>{"speedup", "incorrect"}));
  ASSERT_EQ(observations_[1].rewards.size(), 1u);
  EXPECT_LT(observations_[1].rewards[0], 0);
  EXPECT_EQ(observations_[1].reward_kinds, std::vector<std::string>{"compile_error"});
  EXPECT_EQ(store_->ListRewards("job-1")->size(), 3u);
}

TEST_F(MeasureCallbacksTest, ExchangesAndOutcomesAreKeptByTheProposersKeys) {
  std::unique_ptr<MeasureCallback> keep = MakeExchangeCallback(*store_);
  LlmExchange e;
  e.job_id = "job-1";
  e.model = "scripted";
  e.prompt = "write a kernel";
  for (int i = 0; i < 2; ++i) e.samples.push_back({0, i, "answer", "", "proposed", "", {}, {}, "", ""});
  LlmSample outcome;
  outcome.reward = 0.5;
  outcome.advantage = 1.0;
  outcome.reward_kind = "speedup";
  round_.records = {{7, e, 0, {}}, {7, std::nullopt, 1, outcome}};
  ASSERT_TRUE(keep->Apply(round_).ok());
  round_.records = {{7, std::nullopt, 0, outcome}, {8, std::nullopt, 0, outcome}};  // 8: never kept
  ASSERT_TRUE(keep->Apply(round_).ok());
  absl::StatusOr<std::vector<LlmExchange>> kept = store_->ListLlmExchanges("job-1");
  ASSERT_TRUE(kept.ok()) << kept.status();
  ASSERT_EQ(kept->size(), 1u);
  ASSERT_EQ((*kept)[0].samples.size(), 2u);
  for (const LlmSample& s : (*kept)[0].samples) {
    EXPECT_EQ(s.reward, 0.5);
    EXPECT_EQ(s.advantage, 1.0);
    EXPECT_EQ(s.reward_kind, "speedup");
  }
}

}  // namespace
}  // namespace anvil
