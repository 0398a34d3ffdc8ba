#include "worker/runner/protocol.h"

#include <gtest/gtest.h>

namespace anvil::runner {
namespace {

v1::RunnerProtocol Defaults(v1::Fidelity fidelity, const std::string& figure = "") {
  v1::RunnerProtocol p;
  p.set_fidelity(fidelity);
  p.set_screen_figure(figure);
  FillDefaults(p);
  return p;
}

v1::Shape Cube(int n) {
  v1::Shape s;
  s.set_m(n);
  s.set_n(n);
  s.set_k(n);
  return s;
}

constexpr int64_t kL2 = int64_t(50) << 20;

TEST(FillDefaults, AScreenRanksByGraphColdInThreeRounds) {
  const v1::RunnerProtocol p = Defaults(v1::FIDELITY_SCREEN);
  EXPECT_EQ(p.screen_figure(), "graph-cold");
  EXPECT_EQ(p.screen_rounds(), 3);
  EXPECT_EQ(p.rounds(), 5);  // the full measurement's, unchanged
  v1::RunnerProtocol given;
  given.set_screen_figure("device");
  given.set_screen_rounds(2);
  FillDefaults(given);
  EXPECT_EQ(given.screen_figure(), "device");
  EXPECT_EQ(given.screen_rounds(), 2);
}

TEST(ScreenHasEnoughReplays, AScreensCandidateStopsOnceItsReplaysAreLongTogether) {
  const v1::RunnerProtocol screen = Defaults(v1::FIDELITY_SCREEN);
  const MeasurePlan plan = PlanFor(screen);
  EXPECT_EQ(screen.screen_replay_us(), 10000.0);
  // 1.2 ms calls, 4 a replay: three replays of 4.8 ms are enough...
  EXPECT_FALSE(ScreenHasEnoughReplays(screen, plan, {}, 4));
  EXPECT_FALSE(ScreenHasEnoughReplays(screen, plan, {1200, 1200}, 4));
  EXPECT_TRUE(ScreenHasEnoughReplays(screen, plan, {1200, 1200, 1200}, 4));
  // ...three of a replay sized to 1 ms are not, six are not, nine are not:
  // a short kernel takes every round.
  EXPECT_FALSE(ScreenHasEnoughReplays(screen, plan, std::vector<double>(9, 20.0), 50));
  // 0.8 ms calls: three replays of 3.2 ms are short of 10 ms, six are not.
  EXPECT_FALSE(ScreenHasEnoughReplays(screen, plan, std::vector<double>(3, 800.0), 4));
  EXPECT_TRUE(ScreenHasEnoughReplays(screen, plan, std::vector<double>(6, 800.0), 4));
  // A full measurement takes every sample of every round.
  const v1::RunnerProtocol full = Defaults(v1::FIDELITY_FULL);
  EXPECT_FALSE(ScreenHasEnoughReplays(full, PlanFor(full), std::vector<double>(9, 5000.0), 4));
}

TEST(CheckProtocol, AScreenNeedsAKnownFigure) {
  EXPECT_TRUE(CheckProtocol(Defaults(v1::FIDELITY_SCREEN, "warm")).ok());
  EXPECT_FALSE(CheckProtocol(Defaults(v1::FIDELITY_SCREEN, "graph_cold")).ok());
  EXPECT_TRUE(CheckProtocol(Defaults(v1::FIDELITY_FULL, "graph_cold")).ok());  // unused there
}

TEST(PlanFor, FullAndUnspecifiedTakeEveryFigure) {
  for (v1::Fidelity f : {v1::FIDELITY_FULL, v1::FIDELITY_UNSPECIFIED}) {
    const MeasurePlan plan = PlanFor(Defaults(f, "device"));
    EXPECT_FALSE(plan.screen);
    EXPECT_EQ(plan.rounds, 5);
    EXPECT_TRUE(plan.cold && plan.warm && plan.call);
    EXPECT_TRUE(plan.graph_hot && plan.graph_cold);
    EXPECT_TRUE(plan.baseline_device);
    EXPECT_EQ(plan.device_samples, 6);
    EXPECT_EQ(plan.warmup_ms, 20);
  }
}

TEST(PlanFor, AScreenTakesItsFigureOnly) {
  struct Want {
    std::string figure;
    bool cold, warm, call, hot, graph_cold, baseline_device;
    std::string lt;
  };
  const Want wants[] = {
      {"graph-cold", false, false, false, false, true, true, "graph-cold"},
      {"graph-hot", false, false, false, true, false, true, "graph-hot"},
      {"device", false, false, false, false, false, true, "device"},
      {"cold", true, false, false, false, false, false, "device"},
      {"warm", false, true, false, false, false, false, "device"},
      {"call", false, false, true, false, false, false, "device"},
  };
  for (const Want& w : wants) {
    SCOPED_TRACE(w.figure);
    const MeasurePlan plan = PlanFor(Defaults(v1::FIDELITY_SCREEN, w.figure));
    EXPECT_TRUE(plan.screen);
    EXPECT_EQ(plan.figure, w.figure);
    EXPECT_EQ(plan.rounds, 3);
    EXPECT_EQ(plan.cold, w.cold);
    EXPECT_EQ(plan.warm, w.warm);
    EXPECT_EQ(plan.call, w.call);
    EXPECT_EQ(plan.graph_hot, w.hot);
    EXPECT_EQ(plan.graph_cold, w.graph_cold);
    EXPECT_EQ(plan.Regime(true), w.graph_cold);
    EXPECT_EQ(plan.baseline_device, w.baseline_device);
    EXPECT_EQ(plan.lt_figure, w.lt);
    EXPECT_EQ(plan.device_samples, w.figure == "device" ? 6 : 2);  // else only the audits' median
    EXPECT_EQ(plan.warmup_ms, 5);
  }
}

// The full count is the one the runner sent before screens existed; 1000^3
// at a 10 us reference call: 100 hot calls a replay, 18 cold sets (108 calls).
TEST(PlannedCalls, FullIsUnchangedAndAScreenCountsItsStepsOnly) {
  const v1::RunnerProtocol full = Defaults(v1::FIDELITY_FULL);
  // warm-up 5 + 5 rounds x (6 + 2 + 20 + 6); 2 x (5 x 3 + 1) replays x (100 + 108); 64 checks.
  EXPECT_EQ(PlannedCallsPerImplementation(full, PlanFor(full), 10, Cube(1000), kL2),
            5 + 5 * 34 + 32 * 208 + 64);
  const v1::RunnerProtocol cold = Defaults(v1::FIDELITY_SCREEN);
  // warm-up 5 + 3 rounds x 2 device samples; 2 x (3 x 3 + 1) cold replays x 108.
  EXPECT_EQ(PlannedCallsPerImplementation(cold, PlanFor(cold), 10, Cube(1000), kL2),
            5 + 3 * 2 + 20 * 108 + 64);
  const v1::RunnerProtocol hot = Defaults(v1::FIDELITY_SCREEN, "graph-hot");
  EXPECT_EQ(PlannedCallsPerImplementation(hot, PlanFor(hot), 10, Cube(1000), kL2),
            5 + 3 * 2 + 20 * 100 + 64);
  const v1::RunnerProtocol warm = Defaults(v1::FIDELITY_SCREEN, "warm");
  EXPECT_EQ(PlannedCallsPerImplementation(warm, PlanFor(warm), 10, Cube(1000), kL2),
            5 + 3 * (2 + 20) + 64);
}

}  // namespace
}  // namespace anvil::runner
