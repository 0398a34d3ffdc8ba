#include "worker/evaluator.h"

#include <gtest/gtest.h>

#include "proto/problem.h"

namespace anvil {
namespace {

v1::LtAlgo Algo(int m, v1::Layout layout, const std::string& version, const std::string& bytes) {
  v1::LtAlgo a;
  *a.mutable_shape() = MakeShape(m, 64, 64);
  a.set_layout(layout);
  a.set_cublas_version(version);
  a.set_algo(bytes);
  return a;
}

// A runner takes the first stored choice that matches its problem, so a newly
// tuned one must replace the earlier (a retune mark included), not follow it.
TEST(MergeTunedAlgo, ReplacesTheSameProblemsChoiceAndKeepsOthers) {
  std::vector<v1::LtAlgo> algos = {Algo(128, v1::LAYOUT_NT, "130100", "old"),
                                   Algo(256, v1::LAYOUT_NT, "130100", "other"),
                                   Algo(128, v1::LAYOUT_NN, "130100", "nn"),
                                   Algo(128, v1::LAYOUT_NT, "130000", "older cublas")};
  algos[0].set_retune(true);
  MergeTunedAlgo(algos, Algo(128, v1::LAYOUT_NT, "130100", "new"));
  ASSERT_EQ(algos.size(), 4u);
  int matching = 0;
  for (const v1::LtAlgo& a : algos) {
    if (a.shape().m() == 128 && a.layout() == v1::LAYOUT_NT && a.cublas_version() == "130100") {
      ++matching;
      EXPECT_EQ(a.algo(), "new");
      EXPECT_FALSE(a.retune());
    }
  }
  EXPECT_EQ(matching, 1);
  EXPECT_EQ(algos[0].algo(), "other");
  EXPECT_EQ(algos[1].algo(), "nn");
  EXPECT_EQ(algos[2].algo(), "older cublas");
}

TEST(MergeTunedAlgo, AppendsAChoiceForANewProblem) {
  std::vector<v1::LtAlgo> algos;
  MergeTunedAlgo(algos, Algo(64, v1::LAYOUT_NN, "130100", "first"));
  ASSERT_EQ(algos.size(), 1u);
  EXPECT_EQ(algos[0].algo(), "first");
}

}  // namespace
}  // namespace anvil
