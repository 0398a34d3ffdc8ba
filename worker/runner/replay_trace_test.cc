#include "worker/runner/replay_trace.h"

#include <gtest/gtest.h>

namespace anvil::runner {
namespace {

Activity Kernel(uint64_t start_ns, uint64_t end_ns) {
  Activity a;
  a.start_ns = start_ns;
  a.end_ns = end_ns;
  return a;
}

TEST(ReplayTraceTest, KernelsBackToBackWithGaps) {
  // Three 2 us kernels, 0.3 us apart, recorded out of order, and a memset.
  std::vector<Activity> acts = {Kernel(4600, 6600), Kernel(0, 2000), Kernel(2300, 4300)};
  acts.push_back({Activity::kMemset, 100, 9000, 0, "memset"});
  ReplayTrace t = SummariseReplay(acts);
  EXPECT_EQ(t.kernels, 3);
  EXPECT_DOUBLE_EQ(t.kernel_us, 2.0);
  EXPECT_NEAR(t.gap_us, 0.3, 1e-9);
  EXPECT_NEAR(t.span_us, 6.6 / 3, 1e-9);
}

TEST(ReplayTraceTest, OverlappingKernelsHaveNegativeGaps) {
  // Under programmatic dependent launch the next kernel starts before the last ends.
  ReplayTrace t = SummariseReplay({Kernel(0, 2000), Kernel(1800, 3800), Kernel(3600, 5600), Kernel(5400, 7400)});
  EXPECT_NEAR(t.gap_us, -0.2, 1e-9);
  EXPECT_NEAR(t.span_us, 7.4 / 4, 1e-9);
  EXPECT_LT(t.span_us, t.kernel_us);
}

TEST(ReplayTraceTest, NothingOrOneKernel) {
  EXPECT_EQ(SummariseReplay({}).kernels, 0);
  ReplayTrace one = SummariseReplay({Kernel(10, 1010)});
  EXPECT_EQ(one.kernels, 1);
  EXPECT_DOUBLE_EQ(one.kernel_us, 1.0);
  EXPECT_DOUBLE_EQ(one.gap_us, 0.0);
  EXPECT_DOUBLE_EQ(one.span_us, 1.0);
}

}  // namespace
}  // namespace anvil::runner
