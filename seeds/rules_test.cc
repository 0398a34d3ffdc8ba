#include "seeds/rules.h"

#include <gtest/gtest.h>

namespace anvil {
namespace {

int64_t Eval(const std::string& text, const RuleVars& vars = {}) {
  absl::StatusOr<Expr> e = Expr::Parse(text);
  EXPECT_TRUE(e.ok()) << e.status();
  if (!e.ok()) return -999;
  absl::StatusOr<int64_t> v = e->Eval(vars);
  EXPECT_TRUE(v.ok()) << v.status();
  return v.ok() ? *v : -999;
}

TEST(Expr, FollowsCPrecedenceAndIntegerDivision) {
  EXPECT_EQ(Eval("1 + 2 * 3"), 7);
  EXPECT_EQ(Eval("(1 + 2) * 3"), 9);
  EXPECT_EQ(Eval("7 / 2"), 3);
  EXPECT_EQ(Eval("-7 / 2"), -3);
  EXPECT_EQ(Eval("7 % 4 == 3"), 1);
  EXPECT_EQ(Eval("1 < 2 == 1"), 1);  // relational binds tighter than equality
  EXPECT_EQ(Eval("2 <= 2 && 3 >= 4 || 5 != 5"), 0);
  EXPECT_EQ(Eval("!0 + !7"), 1);
  EXPECT_EQ(Eval("10 - 4 - 3"), 3);  // left-associative
  EXPECT_EQ(Eval("min(3, 8) + max(2, -1)"), 5);
}

TEST(Expr, ReadsVariablesAndListsThem) {
  absl::StatusOr<Expr> e = Expr::Parse("ANVIL_BM % ANVIL_CONSUMERS == 0 && ANVIL_BM <= 256");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->variables(), (std::vector<std::string>{"ANVIL_BM", "ANVIL_CONSUMERS"}));
  EXPECT_EQ(*e->Eval({{"ANVIL_BM", 128}, {"ANVIL_CONSUMERS", 2}}), 1);
  EXPECT_EQ(*e->Eval({{"ANVIL_BM", 129}, {"ANVIL_CONSUMERS", 2}}), 0);
}

TEST(Expr, ShortCircuitsLikeC) {
  EXPECT_EQ(Eval("X != 0 && 10 / X > 2", {{"X", 0}}), 0);
  EXPECT_EQ(Eval("X == 0 || 10 / X > 2", {{"X", 0}}), 1);
}

TEST(Expr, ReportsErrors) {
  for (const char* bad : {"", "1 +", "(1", "1 2", "3 $ 4", "foo(1, 2)", "min(1)",
                          "99999999999999999999"}) {
    EXPECT_FALSE(Expr::Parse(bad).ok()) << bad;
  }
  absl::StatusOr<Expr> e = Expr::Parse("A / B");
  ASSERT_TRUE(e.ok());
  EXPECT_FALSE(e->Eval({{"A", 1}, {"B", 0}}).ok());
  EXPECT_FALSE(e->Eval({{"A", 1}}).ok());
}

}  // namespace
}  // namespace anvil
