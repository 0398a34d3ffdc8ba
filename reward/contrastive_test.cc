#include "reward/contrastive.h"

#include <gtest/gtest.h>

#include "reward/profile_hint.h"

namespace anvil {
namespace {

v1::Measurement Timed(int m, int n, int k, double ours, double base) {
  v1::Measurement r;
  r.set_verdict(v1::VERDICT_PASSED);
  r.mutable_problem()->mutable_shape()->set_m(m);
  r.mutable_problem()->mutable_shape()->set_n(n);
  r.mutable_problem()->mutable_shape()->set_k(k);
  r.mutable_timings()->mutable_device()->set_median_us(ours);
  r.add_baselines()->mutable_timings()->mutable_device()->set_median_us(base);
  return r;
}

TEST(UnifiedDiff, ShowsChangedLinesWithContext) {
  std::string d = UnifiedDiff("a\nb\nc\nd\ne\nf\ng", "a\nb\nc\nD\ne\nf\ng", "old", "new", 1);
  EXPECT_EQ(d, "--- old\n+++ new\n@@ -3 +3 @@\n c\n-d\n+D\n e\n");
  EXPECT_EQ(UnifiedDiff("same", "same", "x", "y"), "");
  std::string big_a, big_b;
  for (int i = 0; i < 100; ++i) big_a += "x\n", big_b += "y\n";
  EXPECT_NE(UnifiedDiff(big_a, big_b, "a", "b", 2, 10).find("diff cut after 10 lines"), std::string::npos);
}

TEST(SummariseProfile, NamesAMemoryBoundSmallShapeAndAComputeBoundLargeOne) {
  v1::Measurement small = Timed(16, 4096, 4096, 20, 22);
  (*small.mutable_profile())["hw.sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"] = 9;
  (*small.mutable_profile())["hw.dram__bytes_read.sum"] = 34e6;
  (*small.mutable_profile())["hw.dram__bytes_write.sum"] = 0.1e6;
  (*small.mutable_profile())["hw.smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct"] = 55;
  (*small.mutable_profile())["hw.sm__cycles_active.avg"] = 900;
  (*small.mutable_profile())["hw.sm__cycles_active.max"] = 1000;
  ProfileHint s = SummariseProfile(small);
  EXPECT_EQ(s.bottleneck, "memory");
  EXPECT_NE(s.text.find("long scoreboard"), std::string::npos) << s.text;
  v1::Measurement large = Timed(8192, 8192, 8192, 1300, 1350);
  (*large.mutable_profile())["hw.sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"] = 81;
  (*large.mutable_profile())["hw.baseline.sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"] = 78;
  ProfileHint l = SummariseProfile(large);
  EXPECT_EQ(l.bottleneck, "compute");
  EXPECT_NE(l.text.find("fastest baseline 78%"), std::string::npos) << l.text;
  EXPECT_EQ(SummariseProfile(Timed(64, 64, 64, 1, 1)).bottleneck, "unknown");
}

TEST(RenderContrast, PutsTheBestFirstAndDiffsTheOthersAgainstIt) {
  ContrastExemplar best{{}, Timed(4096, 4096, 4096, 100, 110), {}, "4096x4096x4096 nt"};
  best.candidate.set_name("best");
  best.candidate.set_source("stages = 4;\nbody");
  (*best.candidate.mutable_params())["STAGES"] = "4";
  v1::KernelUsage u;
  u.set_registers(168);
  best.usage = {u};
  ContrastExemplar slow{{}, Timed(4096, 4096, 4096, 200, 110), {}, "4096x4096x4096 nt"};
  slow.candidate.set_name("slow");
  slow.candidate.set_source("stages = 2;\nbody");
  std::string text = RenderContrast({best, slow}, "device");
  EXPECT_NE(text.find("### A: best (the current best)"), std::string::npos) << text;
  EXPECT_NE(text.find("1.100x the fastest vendor baseline by device time"), std::string::npos);
  EXPECT_NE(text.find("0.550x"), std::string::npos);
  EXPECT_NE(text.find("168 registers"), std::string::npos);
  EXPECT_NE(text.find("knobs: STAGES=4"), std::string::npos);
  EXPECT_NE(text.find("-stages = 2;\n+stages = 4;"), std::string::npos) << text;
  EXPECT_EQ(RenderContrast({}, "device"), "");
}

}  // namespace
}  // namespace anvil
