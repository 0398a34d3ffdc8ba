#include "worker/ptxas.h"

#include <gtest/gtest.h>

namespace anvil {
namespace {

constexpr char kReport[] = R"(ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z4gemmPK6__halfS1_PS_iii' for 'sm_90a'
ptxas info    : Function properties for _Z4gemmPK6__halfS1_PS_iii
    16 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 168 registers, used 1 barriers, 32768 bytes smem, 400 bytes cmem[0]
ptxas info    : Compiling entry function '_Z5smallv' for 'sm_90a'
ptxas info    : Function properties for _Z5smallv
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 8 registers, used 0 barriers, 352 bytes cmem[0]
)";

TEST(ParsePtxasReport, ReadsEveryKernel) {
  std::vector<v1::KernelUsage> k = ParsePtxasReport(kReport);
  ASSERT_EQ(k.size(), 2u);
  EXPECT_EQ(k[0].kernel(), "_Z4gemmPK6__halfS1_PS_iii");
  EXPECT_EQ(k[0].registers(), 168);
  EXPECT_EQ(k[0].shared_bytes(), 32768);
  EXPECT_EQ(k[0].stack_frame_bytes(), 16);
  EXPECT_EQ(k[0].spill_store_bytes(), 8);
  EXPECT_EQ(k[0].spill_load_bytes(), 12);
  EXPECT_EQ(k[0].constant_bytes(), 400);
  EXPECT_EQ(k[1].registers(), 8);
  EXPECT_EQ(k[1].shared_bytes(), 0);
}

TEST(ParsePtxasReport, IgnoresOtherOutput) {
  EXPECT_TRUE(ParsePtxasReport("warning: something\nerror: else\n").empty());
}

}  // namespace
}  // namespace anvil
