#include "reward/advantage.h"

#include <gtest/gtest.h>

#include <cmath>

#include "reward/bandit.h"

namespace anvil {
namespace {

TEST(ClippedReward, ClipsSpeedupsButNotFailures) {
  EXPECT_DOUBLE_EQ(ClippedReward({5.0, "speedup", 32}), 3.0);
  EXPECT_DOUBLE_EQ(ClippedReward({-7.0, "speedup", 1.0 / 128}), -3.0);
  EXPECT_DOUBLE_EQ(ClippedReward({0.5, "speedup", 1.41}), 0.5);
  EXPECT_DOUBLE_EQ(ClippedReward({-20, "cheat", 0}), -20);
  EXPECT_DOUBLE_EQ(SampleReward({1, 0, -1, 2}), 0.5);
}

TEST(GroupAdvantages, AreZeroMeanUnitSpreadAndRankLikeTheRewards) {
  std::vector<double> a = GroupAdvantages({0.2, -10, 0.5, -20});
  double sum = 0, sq = 0;
  for (double x : a) sum += x, sq += x * x;
  EXPECT_NEAR(sum, 0, 1e-9);
  EXPECT_NEAR(sq / a.size(), 1, 1e-4);
  EXPECT_GT(a[2], a[0]);
  EXPECT_GT(a[0], a[1]);
  EXPECT_GT(a[1], a[3]);  // cheating is worst
  EXPECT_EQ(GroupAdvantages({1.5}), std::vector<double>{0});
  EXPECT_EQ(GroupAdvantages({2, 2, 2}), (std::vector<double>{0, 0, 0}));
}

TEST(Ucb1, TriesEveryArmThenFavoursTheOneThatPays) {
  Ucb1 bandit({"embedded", "llm/contrast", "llm/minimal"});
  std::vector<int> first;
  for (int i = 0; i < 3; ++i) {
    int arm = bandit.Choose();
    first.push_back(arm);
    bandit.Update(arm, 0.5);
  }
  EXPECT_EQ(first, (std::vector<int>{0, 1, 2}));
  std::vector<int> pulls(3);
  for (int i = 0; i < 300; ++i) {
    int arm = bandit.Choose();
    ++pulls[arm];
    bandit.Update(arm, arm == 1 ? 0.9 : 0.1);
  }
  EXPECT_GT(pulls[1], 200);
  EXPECT_GT(pulls[0], 0);  // exploration never stops
  EXPECT_EQ(bandit.Choose({true, false, true}) == 1, false);
  EXPECT_EQ(bandit.Choose({false, false, false}), -1);
  EXPECT_NE(bandit.Describe().find("llm/contrast: 0.9"), std::string::npos) << bandit.Describe();
}

TEST(RewardPayoff, MapsRewardsIntoTheUnitInterval) {
  EXPECT_EQ(RewardPayoff(-12, false), 0);
  EXPECT_NEAR(RewardPayoff(-1, true), 0.1, 1e-9);
  EXPECT_NEAR(RewardPayoff(std::log2(1.25), true), 1.0, 1e-9);
  EXPECT_GT(RewardPayoff(0.1, true), RewardPayoff(0, true));
}

}  // namespace
}  // namespace anvil
