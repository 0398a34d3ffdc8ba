// The bottleneck rules (profile_hint.h) on counter profiles taken on an H100
// (02_mma_sync's default tiles on 16x4096x4096 nt, 03_wgmma_tma on 8192^3 nt,
// and the fastest cuBLAS baseline of each), and on synthetic sets.
#include "reward/profile_hint.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace anvil {
namespace {

using Counters = std::map<std::string, double>;

v1::Measurement Profiled(int m, int n, int k, double sol_us, const Counters& hw) {
  v1::Measurement r;
  r.set_verdict(v1::VERDICT_PASSED);
  r.mutable_problem()->mutable_shape()->set_m(m);
  r.mutable_problem()->mutable_shape()->set_n(n);
  r.mutable_problem()->mutable_shape()->set_k(k);
  r.set_sol_us(sol_us);
  for (const auto& [name, v] : hw) (*r.mutable_profile())["hw." + name] = v;
  return r;
}

// Counter names, shortened.
constexpr char kTensor[] = "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active";
constexpr char kLongSb[] = "smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct";

Counters Span(double range_ns, double elapsed, double active_avg, double active_max) {
  return {{"gpu__time_duration.sum", range_ns}, {"gpc__cycles_elapsed.max", elapsed},
          {"sm__cycles_active.avg", active_avg}, {"sm__cycles_active.max", active_max}};
}

Counters With(Counters c, const Counters& more) {
  c.insert(more.begin(), more.end());
  return c;
}

// 02_mma_sync, 128x128 tiles, on 16x4096x4096: 32 CTAs on 132 SMs.
const Counters kMmaSmall = With(Span(133120, 254154, 29274.5, 121638),
    {{"dram__bytes_read.sum", 3.37329e7}, {"dram__bytes_write.sum", 2.16635e7},
     {"sm__ctas_launched.sum", 32}, {kTensor, 40.7031}, {kLongSb, 5.22934}});
// cuBLAS on the same problem: 128 CTAs streaming B.
const Counters kCublasSmall = With(Span(124608, 245657, 29805.8, 32145),
    {{"dram__bytes_read.sum", 3.37047e7}, {"dram__bytes_write.sum", 9.73978e6},
     {"sm__ctas_launched.sum", 128}, {kTensor, 3.33146}, {kLongSb, 75.9326}});
// 03_wgmma_tma's default on 8192^3 and cuBLAS there.
const Counters kWgmmaLarge = With(Span(1.5959e6, 2.47046e6, 2.21941e6, 2.30281e6),
    {{"dram__bytes_read.sum", 1.50169e9}, {"dram__bytes_write.sum", 1.52876e8},
     {"sm__ctas_launched.sum", 2048}, {kTensor, 91.6281}});
const Counters kCublasLarge = With(Span(1.51526e6, 2.37701e6, 2.06366e6, 2.08392e6),
    {{"dram__bytes_read.sum", 1.47985e9}, {"dram__bytes_write.sum", 1.53032e8},
     {"sm__ctas_launched.sum", 132}, {kTensor, 99.5058}});
constexpr double kSmallSolUs = 11.40;  // 16x4096x4096 by that H100's copy ceiling

TEST(ProfileHint, TooFewCtasOnASmallShapeIsImbalanceNotMemory) {
  ProfileHint h = SummariseProfile(Profiled(16, 4096, 4096, kSmallSolUs, kMmaSmall));
  EXPECT_EQ(h.bottleneck, "imbalance") << h.text;
  EXPECT_NEAR(h.facts.sm_balance, 0.24, 0.01);
  EXPECT_NEAR(h.facts.kernel_us, 63.7, 0.1);      // 121638 of 254154 cycles of 133.1 us
  EXPECT_NEAR(h.facts.dram_fraction, 0.29, 0.01);  // 55.4 MB in 63.7 us of ~2.97 TB/s
  EXPECT_NE(h.text.find("smaller tiles, split-K"), std::string::npos) << h.text;
  EXPECT_EQ(h.text.rfind("bottleneck: imbalance (tensor pipe 41% < 60%, DRAM at 29% < 60%", 0), 0u)
      << h.text;
}

TEST(ProfileHint, AGpuFillingStreamOfBIsMemory) {
  ProfileHint h = SummariseProfile(Profiled(16, 4096, 4096, kSmallSolUs, kCublasSmall));
  EXPECT_EQ(h.bottleneck, "memory") << h.text;
  EXPECT_NEAR(h.facts.dram_fraction, 0.90, 0.01);  // 43.4 MB in 16.3 us
  EXPECT_NE(h.text.find("long scoreboard"), std::string::npos) << h.text;
}

TEST(ProfileHint, ALargeShapeAtTheTensorRoofIsCompute) {
  for (const Counters* c : {&kWgmmaLarge, &kCublasLarge}) {
    ProfileHint h = SummariseProfile(Profiled(8192, 8192, 8192, 1439.9, *c));
    EXPECT_EQ(h.bottleneck, "compute") << h.text;
    EXPECT_LT(h.facts.dram_fraction, 0.6);  // compulsory bytes x4, spread over 1.5 ms
  }
}

// Synthetic: a balanced skinny kernel moving B at 90% of H100's 3.35 TB/s
// (no speed-of-light recorded: the nominal rate is the yardstick).
TEST(ProfileHint, ClearlyDramBoundIsMemoryAndBeatsIdleSms) {
  const double bytes = 2.0 * (16 * 8192.0 + 8192 * 8192.0 + 16 * 8192.0);
  const double us = bytes / (0.9 * kHopperDramBytesPerS) * 1e6;
  Counters c = With(Span(2 * us * 1e3, 2000, 990, 1000),
                    {{"dram__bytes_read.sum", bytes}, {"dram__bytes_write.sum", 0}, {kTensor, 6}});
  ProfileHint h = SummariseProfile(Profiled(16, 8192, 8192, 0, c));
  EXPECT_EQ(h.bottleneck, "memory") << h.text;
  EXPECT_NEAR(h.facts.dram_fraction, 0.9, 1e-6);
  // Half the SMs idle, but HBM saturated: more CTAs would not help.
  c["sm__cycles_active.avg"] = 480;
  h = SummariseProfile(Profiled(16, 8192, 8192, 0, c));
  EXPECT_EQ(h.bottleneck, "memory") << h.text;
  EXPECT_NE(h.text.find("SMs unevenly loaded"), std::string::npos) << h.text;
}

TEST(ProfileHint, RulesInOrder) {
  ProfileFacts f;
  ProfileHint h;
  ClassifyBottleneck(f, &h);
  EXPECT_EQ(h.bottleneck, "unknown");
  f.intensity = 2000;
  f.tensor_pct = 30;
  f.sm_balance = 0.95;
  f.dram_fraction = 0.2;
  f.dram_over_compulsory = 1.2;
  ClassifyBottleneck(f, &h);
  EXPECT_EQ(h.bottleneck, "latency") << h.why;
  f.dram_over_compulsory = 2;  // re-reading A and B from DRAM
  ClassifyBottleneck(f, &h);
  EXPECT_EQ(h.bottleneck, "memory") << h.why;
  f.sm_balance = 0.5;
  ClassifyBottleneck(f, &h);
  EXPECT_EQ(h.bottleneck, "imbalance") << h.why;
  f.dram_fraction = 0.7;
  ClassifyBottleneck(f, &h);
  EXPECT_EQ(h.bottleneck, "memory") << h.why;
  f.tensor_pct = 75;
  ClassifyBottleneck(f, &h);
  EXPECT_EQ(h.bottleneck, "compute") << h.why;
}

// Rule 4: balanced, below the ridge, no span to rate DRAM by: memory side.
TEST(ProfileHint, BelowTheRidgeWithoutARateIsMemoryAndBaselinesAreQuoted) {
  Counters c = {{kTensor, 9}, {"dram__bytes_read.sum", 34e6}, {"dram__bytes_write.sum", 0.1e6},
                {kLongSb, 55}, {"sm__cycles_active.avg", 900}, {"sm__cycles_active.max", 1000}};
  v1::Measurement m = Profiled(16, 4096, 4096, 0, c);
  (*m.mutable_profile())[std::string("hw.baseline.") + kTensor] = 4;
  ProfileHint h = SummariseProfile(m);
  EXPECT_EQ(h.bottleneck, "memory") << h.text;
  EXPECT_LT(h.facts.dram_fraction, 0);
  EXPECT_NE(h.why.find("below the ridge"), std::string::npos) << h.why;
  EXPECT_NE(h.text.find("tensor pipe busy 9% of active cycles (fastest baseline 4%)"), std::string::npos)
      << h.text;
  h = SummariseProfile(Profiled(64, 64, 64, 0, {}));
  EXPECT_EQ(h.bottleneck, "unknown");
  EXPECT_NE(h.text.find("no hardware counters"), std::string::npos) << h.text;
}

}  // namespace
}  // namespace anvil
