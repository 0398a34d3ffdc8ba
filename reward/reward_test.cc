#include "reward/reward.h"

#include <gtest/gtest.h>

namespace anvil {
namespace {

v1::Measurement Passed(double ours, double cublas, double lt) {
  v1::Measurement m;
  m.set_verdict(v1::VERDICT_PASSED);
  m.mutable_timings()->mutable_device()->set_median_us(ours);
  m.add_baselines()->mutable_timings()->mutable_device()->set_median_us(cublas);
  m.add_baselines()->mutable_timings()->mutable_device()->set_median_us(lt);
  return m;
}

TEST(ComputeReward, IsLog2SpeedupOverTheFastestBaseline) {
  absl::StatusOr<RewardValue> r = ComputeReward(Passed(50, 120, 100), "device");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_DOUBLE_EQ(r->speedup, 2.0);
  EXPECT_DOUBLE_EQ(r->value, 1.0);
  EXPECT_EQ(r->kind, "speedup");
}

TEST(ComputeReward, FailuresRankBelowCorrectKernelsAndCheatsLowest) {
  v1::Measurement slow = Passed(1000, 4, 4);  // 250x slower
  v1::Measurement wrong;
  wrong.set_verdict(v1::VERDICT_INCORRECT);
  v1::Measurement cheat;
  cheat.set_verdict(v1::VERDICT_CHEAT);
  double s = ComputeReward(slow, "device")->value;
  double w = ComputeReward(wrong, "device")->value;
  double c = ComputeReward(cheat, "device")->value;
  EXPECT_GT(s, w);
  EXPECT_GT(w, c);
  EXPECT_EQ(ComputeReward(wrong, "device")->kind, "incorrect");
}

TEST(ComputeReward, RejectsUnknownFigures) {
  EXPECT_FALSE(ComputeReward(Passed(1, 1, 1), "median").ok());
}

TEST(BestBaselineUs, PicksTheFastestMeasuredBaselinePerFigure) {
  v1::Measurement m = Passed(50, 120, 100);
  m.mutable_baselines(0)->mutable_timings()->mutable_warm()->set_median_us(7);
  EXPECT_DOUBLE_EQ(BestBaselineUs(m, "device"), 100);
  EXPECT_DOUBLE_EQ(BestBaselineUs(m, "warm"), 7);  // unmeasured figures are skipped
  EXPECT_DOUBLE_EQ(BestBaselineUs(m, "cold"), 0);
  EXPECT_TRUE(IsFigure("call"));
  EXPECT_FALSE(IsFigure("median"));
}

TEST(BuildFailureReward, NamesTheKind) {
  v1::Build b;
  b.set_verdict(v1::VERDICT_COMPILE_ERROR);
  EXPECT_EQ(BuildFailureReward(b).kind, "compile_error");
  EXPECT_LT(BuildFailureReward(b).value, 0);
}

// A correct candidate without the job's figure (it cannot be captured in a
// graph) is data, not an error: it ranks with those that declined the problem.
TEST(ComputeReward, APassedMeasurementWithoutTheFigureIsRankedNotAnError) {
  v1::Measurement m;
  m.set_verdict(v1::VERDICT_PASSED);
  m.mutable_timings()->mutable_device()->set_median_us(10);
  m.set_graph_note("candidate cannot be captured in a CUDA graph");
  v1::Baseline* b = m.add_baselines();
  b->mutable_timings()->mutable_device()->set_median_us(12);
  b->mutable_timings()->mutable_graph_cold()->set_median_us(15);
  absl::StatusOr<RewardValue> r = ComputeReward(m, "graph-cold");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->kind, "no_figure");
  EXPECT_LT(r->value, 0);
  m.mutable_timings()->mutable_graph_cold()->set_median_us(14);
  b->mutable_timings()->clear_graph_cold();
  r = ComputeReward(m, "graph-cold");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->kind, "no_baseline");
  EXPECT_EQ(r->value, 0);
  r = ComputeReward(m, "device");
  ASSERT_TRUE(r.ok());
  EXPECT_NEAR(r->speedup, 1.2, 1e-12);
}

}  // namespace
}  // namespace anvil
