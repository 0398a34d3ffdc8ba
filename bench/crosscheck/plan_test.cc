#include "bench/crosscheck/plan.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace anvil::crosscheck {
namespace {

TEST(ParsePlan, ReadsRowsAndSkipsCommentsAndHeader) {
  absl::StatusOr<std::vector<Row>> rows = ParsePlan(
      "m,n,k,layout,library,runner_graph_cold,runner_graph_hot\n"
      "# dev shapes\n"
      "1000,1000,1000,nt,/cache/ab/candidate.so,1.031,1.012\n"
      "\n"
      "512,2048,512,nn,lib.so,0,0.98\n");
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0].m, 1000);
  EXPECT_TRUE((*rows)[0].nt);
  EXPECT_EQ((*rows)[0].library, "/cache/ab/candidate.so");
  EXPECT_DOUBLE_EQ((*rows)[0].runner_cold, 1.031);
  EXPECT_FALSE((*rows)[1].nt);
  EXPECT_DOUBLE_EQ((*rows)[1].runner_cold, 0);
  EXPECT_DOUBLE_EQ((*rows)[1].runner_hot, 0.98);
}

TEST(ParsePlan, NamesTheLineOfAMalformedRow) {
  for (const char* bad : {"1,2,3,nt,lib.so,1\n", "0,2,3,nt,lib.so,1,1\n", "1,2,x,nt,lib.so,1,1\n",
                          "1,2,3,tn,lib.so,1,1\n", "1,2,3,nt,,1,1\n", "1,2,3,nt,a.so,-1,1\n",
                          "1,2,3,nt,a.so,1,fast\n", "1,2,3000000000,nt,a.so,1,1\n"}) {
    absl::StatusOr<std::vector<Row>> rows = ParsePlan(std::string("# header\n") + bad);
    EXPECT_EQ(rows.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(rows.status().message()), testing::HasSubstr("line 2")) << bad;
  }
}

TEST(Agrees, WithinTheToleranceOnlyWhenBothExist) {
  EXPECT_TRUE(Agrees(1.05, 1.03, 0.03));
  EXPECT_FALSE(Agrees(1.10, 1.03, 0.03));
  EXPECT_FALSE(Agrees(0, 1.0, 0.03));
  EXPECT_FALSE(Agrees(1.0, 0, 0.03));
}

}  // namespace
}  // namespace anvil::crosscheck
