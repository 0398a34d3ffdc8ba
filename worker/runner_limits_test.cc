#include "worker/runner_limits.h"

#include <string>

#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"

namespace anvil {
namespace {

std::string Line(const v1::RunnerEvent& e) {
  std::string json;
  EXPECT_TRUE(google::protobuf::util::MessageToJsonString(e, &json).ok());
  return json + "\n";
}

v1::ProblemStart Start(double reference_us) {
  v1::ProblemStart s;
  s.set_reference_call_us(reference_us);
  s.set_candidate_calls(234);
  s.set_baseline_calls(3 * 234);
  s.set_warmup_seconds(0.08);
  return s;
}

TEST(RunnerLimitsTest, AHangOnASmallProblemCostsSecondsAndABigProblemGetsItsShare) {
  RunnerLimits limits;
  std::string basis;
  // 1000^3, best baseline ~7 us, slowest ~10 us.
  const double small = absl::ToDoubleSeconds(ProblemTimeLimit(limits, Start(10), false, &basis));
  EXPECT_GT(small, 5);
  EXPECT_LT(small, 7);
  EXPECT_TRUE(absl::StrContains(basis, "234 candidate calls")) << basis;
  // 16384^3 at ~9 ms a call: a candidate 20x slower still finishes.
  const double big = absl::ToDoubleSeconds(ProblemTimeLimit(limits, Start(9000), false, &basis));
  EXPECT_GT(big, 234 * 20 * 9e-3);
  EXPECT_LE(big, absl::ToDoubleSeconds(limits.problem_timeout));
  // Profiling adds its allowance; no baseline falls back to the fixed limit.
  EXPECT_NEAR(absl::ToDoubleSeconds(ProblemTimeLimit(limits, Start(10), true, &basis)) - small,
              limits.profile_seconds, 1e-9);
  EXPECT_EQ(ProblemTimeLimit(limits, Start(0), false, &basis), limits.problem_timeout);
  EXPECT_TRUE(absl::StrContains(basis, "fixed")) << basis;
}

TEST(RunnerLimitsTest, WatchMovesTheDeadlineWithTheEventsAcrossSplitChunks) {
  RunnerLimits limits;
  RunnerWatch watch(limits, false);
  v1::RunnerEvent info, start, measurement;
  info.mutable_info()->set_gpu("H100");
  *start.mutable_problem_start() = Start(10);
  measurement.mutable_measurement()->set_verdict(v1::VERDICT_PASSED);

  std::optional<absl::Duration> left = watch.OnStdout("device printf noise\n");
  EXPECT_FALSE(left.has_value());
  EXPECT_EQ(watch.current_basis(), "startup");
  left = watch.OnStdout(Line(info));
  ASSERT_TRUE(left.has_value());
  EXPECT_EQ(*left, limits.setup_timeout);
  const std::string s = Line(start);  // split mid-line
  EXPECT_FALSE(watch.OnStdout(s.substr(0, 10)).has_value());
  left = watch.OnStdout(s.substr(10));
  ASSERT_TRUE(left.has_value());
  EXPECT_LT(*left, absl::Seconds(7));
  EXPECT_TRUE(absl::StrContains(watch.current_basis(), "slowest baseline")) << watch.current_basis();
  left = watch.OnStdout(Line(measurement));
  ASSERT_TRUE(left.has_value());
  EXPECT_EQ(*left, limits.setup_timeout);
  ASSERT_EQ(watch.applied().size(), 1u);
  EXPECT_GT(watch.applied()[0].limit_s, 5);
  EXPECT_EQ(watch.applied()[0].reference_call_us, 10);
  EXPECT_EQ(watch.events().size(), 3u);
}

TEST(RunnerLimitsTest, AForgedHugeReferenceIsCappedByTheFixedLimit) {
  RunnerLimits limits;
  RunnerWatch watch(limits, false);
  v1::RunnerEvent forged;
  *forged.mutable_problem_start() = Start(1e12);
  std::optional<absl::Duration> left = watch.OnStdout(Line(forged));
  ASSERT_TRUE(left.has_value());
  EXPECT_EQ(*left, limits.problem_timeout);
}

TEST(RunnerLimitsTest, ALastLineWithoutNewlineCountsAtFinish) {
  RunnerWatch watch(RunnerLimits(), false);
  v1::RunnerEvent measurement;
  measurement.mutable_measurement()->set_verdict(v1::VERDICT_INCORRECT);
  std::string line = Line(measurement);
  line.pop_back();
  watch.OnStdout(line);
  EXPECT_TRUE(watch.events().empty());
  watch.Finish();
  EXPECT_EQ(watch.events().size(), 1u);
}

}  // namespace
}  // namespace anvil
