// The evaluation harness on a real GPU: our seeds pass on aligned and tail
// shapes in both layouts; every deliberately broken variant (tests/broken)
// and every hostile candidate (tests/adversarial) gets the verdict and reason
// its "EXPECT: verdict=... reason=a|b" header names, and the GPU stays usable
// for the next candidate. Label: gpu.
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <optional>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "deploy/layout.h"
#include "proto/problem.h"
#include "sandbox/sandbox.h"
#include "seeds/seeds.h"
#include "seeds/space.h"
#include "worker/builder.h"
#include "worker/runner_host.h"
#include "tests/gpu_fixture.h"
#include "tools/soak/fixtures.h"


namespace anvil {
namespace {

using testing::TestsDir;

class Harness : public ::testing::Test {
 public:
  static void SetUpTestSuite() {
    absl::StatusOr<Toolchain> t = Toolchain::Find();
    ASSERT_TRUE(t.ok()) << t.status();
    absl::StatusOr<std::unique_ptr<sandbox::ScratchDir>> dir = testing::NewScratch("harness-test-");
    ASSERT_TRUE(dir.ok()) << dir.status();
    scratch_ = dir->release();
    builder_ = testing::NewBuilder(*t, *scratch_).release();
    RunnerHostOptions e = RunnerOptionsWith(*t, FixtureProtocol());
    evaluator_ = new RunnerHost(e);
    e.protocol.set_profile_counters(true);
    profiling_evaluator_ = new RunnerHost(e);
  }
  // The evaluators' options: scratch below the suite's folder, 20 s limits.
  static RunnerHostOptions RunnerOptionsWith(const Toolchain& t, v1::RunnerProtocol protocol) {
    return testing::RunnerOptionsIn(t, *scratch_, std::move(protocol));
  }
  static void TearDownTestSuite() {
    delete profiling_evaluator_;
    delete evaluator_;
    delete builder_;
    delete scratch_;
  }
  // The seed families: ANVIL_SEEDS_DIR, the bundle's, or the source tree's.
  static absl::StatusOr<std::vector<SeedFamily>> Seeds() {
    return LoadSeeds(DefaultSeedsDir(deploy::ExecutableDir()));
  }
  // Builds a candidate that must compile: its build, or why it is not there.
  static absl::StatusOr<v1::Build> BuildPassing(const v1::Candidate& c) {
    absl::StatusOr<v1::Build> b = builder_->Build(c);
    if (b.ok() && b->verdict() != v1::VERDICT_PASSED)
      return absl::InternalError(absl::StrCat(c.name(), " did not build: ", b->error()));
    return b;
  }
  // The last seed family's default configuration for NT, built (it must build).
  struct BuiltSeed {
    v1::Candidate candidate;
    v1::Build build;
  };
  static absl::StatusOr<BuiltSeed> LastSeedNtBuilt() {
    absl::StatusOr<std::vector<SeedFamily>> seeds = Seeds();
    if (!seeds.ok()) return seeds.status();
    if (seeds->empty()) return absl::NotFoundError("no seed families");
    BuiltSeed out;
    out.candidate = MakeSeedCandidate(seeds->back(), v1::LAYOUT_NT);
    absl::StatusOr<v1::Build> b = BuildPassing(out.candidate);
    if (!b.ok()) return b.status();
    out.build = *std::move(b);
    return out;
  }
  // Builds and measures; the build must pass.
  static std::vector<v1::Measurement> Measure(const v1::Candidate& c,
                                              const std::vector<v1::Shape>& shapes) {
    absl::StatusOr<v1::Build> b = BuildPassing(c);
    EXPECT_TRUE(b.ok()) << b.status();
    if (!b.ok()) return {};
    absl::StatusOr<RunnerResults> ev = evaluator_->Measure(c, *b, shapes, {});
    EXPECT_TRUE(ev.ok()) << ev.status();
    return ev.ok() ? ev->measurements : std::vector<v1::Measurement>{};
  }
  static sandbox::ScratchDir* scratch_;
  static Builder* builder_;
  static RunnerHost* evaluator_;
  static RunnerHost* profiling_evaluator_;  // protocol.profile_counters on
};
sandbox::ScratchDir* Harness::scratch_ = nullptr;
Builder* Harness::builder_ = nullptr;
RunnerHost* Harness::evaluator_ = nullptr;
RunnerHost* Harness::profiling_evaluator_ = nullptr;

v1::Shape S(int m, int n, int k) { return MakeShape(m, n, k); }

TEST_F(Harness, SeedsPassOnAlignedAndTailShapesInBothLayouts) {
  absl::StatusOr<std::vector<SeedFamily>> seeds = Seeds();
  ASSERT_TRUE(seeds.ok()) << seeds.status();
  std::vector<v1::Shape> shapes = {S(256, 128, 128), S(130, 200, 72), S(77, 300, 1234),
                                   S(1, 1, 1), S(1000, 1000, 1000)};
  for (const SeedFamily& f : *seeds) {
    for (v1::Layout layout : f.layouts) {
      v1::Candidate c = MakeSeedCandidate(f, layout);
      std::vector<v1::Measurement> ms = Measure(c, shapes);
      ASSERT_EQ(ms.size(), shapes.size()) << c.name();
      for (const v1::Measurement& m : ms) {
        EXPECT_EQ(m.verdict(), v1::VERDICT_PASSED)
            << c.name() << " " << ProblemName(m.problem()) << ": " << m.reason() << " " << m.detail();
        if (m.verdict() != v1::VERDICT_PASSED) continue;
        EXPECT_LE(m.rel_err(), 4.9e-4);  // fp16 rounding of C: half an ulp at most
        EXPECT_LT(m.profile().at("excess_err"), 3e-4);
        EXPECT_GT(m.timings().device().median_us(), 0);
        EXPECT_EQ(m.baselines_size(), 3);
      }
    }
  }
}

// A configuration specialised to a problem (the shape knobs set by the search)
// is checked like any other on its own shape, a tail shape here, and refuses
// any other shape with an error the harness reports, not a wrong result.
TEST_F(Harness, SpecialisedSeedsPassOnTheirShapeAndRefuseOthers) {
  absl::StatusOr<std::vector<SeedFamily>> seeds = Seeds();
  ASSERT_TRUE(seeds.ok()) << seeds.status();
  const v1::Shape own = S(77, 300, 1234);
  int specialised = 0;
  for (const SeedFamily& f : *seeds) {
    const std::optional<KnobParams> params = Specialise(f, {}, own);
    if (!f.searchable || !params) continue;
    for (v1::Layout layout : f.layouts) {
      ++specialised;
      const v1::Candidate c = MakeSeedCandidate(f, layout, *params);
      std::vector<v1::Measurement> ms = Measure(c, {own, S(256, 128, 128)});
      ASSERT_EQ(ms.size(), 2u) << c.name();
      EXPECT_EQ(ms[0].verdict(), v1::VERDICT_PASSED) << c.name() << ": " << ms[0].reason() << " " << ms[0].detail();
      EXPECT_EQ(ms[1].verdict(), v1::VERDICT_UNSUPPORTED) << c.name();
      EXPECT_EQ(ms[1].reason(), "returned_error") << c.name();
    }
  }
  EXPECT_EQ(specialised, 4);  // 02_mma_sync and 03_wgmma_tma, both layouts
}

// Pingpong consumers holding a whole 128x192 tile (192 accumulators each) and
// sharing one staging slab for their TMA-store epilogues: shapes with several
// tiles per CTA (so the consumers alternate and hand the buffer over), tails in
// every dimension, and N % 8 != 0 (C not TMA-storable: direct stores), in both
// layouts, in multicast clusters of 2.
TEST_F(Harness, PingpongWholeTilesWithASharedStagingSlabPass) {
  absl::StatusOr<std::vector<SeedFamily>> seeds = Seeds();
  ASSERT_TRUE(seeds.ok()) << seeds.status();
  const KnobParams params = {{"BM", "128"},       {"BN", "192"},       {"CONSUMERS", "2"},
                             {"PERSISTENT", "1"}, {"SCHEDULE", "1"},   {"EPILOGUE", "2"},
                             {"STAGES", "5"},     {"CLUSTER", "2"},    {"CONSUMER_REGS", "232"}};
  const std::vector<v1::Shape> shapes = {S(4096, 4096, 128), S(2000, 3000, 72), S(77, 300, 1234),
                                         S(1000, 1001, 200)};
  int checked = 0;
  for (const SeedFamily& f : *seeds) {
    if (f.name != "03_wgmma_tma") continue;
    for (v1::Layout layout : f.layouts) {
      const absl::Status legal = CheckConfig(f, layout, params);
      ASSERT_TRUE(legal.ok()) << legal;
      const v1::Candidate c = MakeSeedCandidate(f, layout, params);
      std::vector<v1::Measurement> ms = Measure(c, shapes);
      ASSERT_EQ(ms.size(), shapes.size()) << c.name();
      for (const v1::Measurement& m : ms) {
        EXPECT_EQ(m.verdict(), v1::VERDICT_PASSED)
            << c.name() << " " << ProblemName(m.problem()) << ": " << m.reason() << " " << m.detail();
        EXPECT_LE(m.rel_err(), 4.9e-4);
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 2);  // both layouts
}

// `anvil eval --profile`: GPU counters of one call of the candidate and of the
// fastest baseline, after the timing. Every operand byte passes through L2 at
// least once, and the profiled call's duration is of the order of the timed one.
TEST_F(Harness, CounterProfileOfTheCandidateAndTheFastestBaseline) {
  absl::StatusOr<BuiltSeed> built = LastSeedNtBuilt();
  ASSERT_TRUE(built.ok()) << built.status();
  const v1::Candidate& c = built->candidate;
  const v1::Build& b = built->build;
  absl::StatusOr<RunnerResults> ev = profiling_evaluator_->Measure(c, b, {S(1024, 1024, 1024)}, {});
  ASSERT_TRUE(ev.ok()) << ev.status();
  ASSERT_EQ(ev->measurements.size(), 1u);
  const v1::Measurement& m = ev->measurements[0];
  ASSERT_EQ(m.verdict(), v1::VERDICT_PASSED) << m.reason() << " " << m.detail();
  const auto& p = m.profile();
  if (!p.contains("hw.gpu__time_duration.sum")) {
    if (absl::StrContains(m.profile_error(), "restricted to admin users"))
      GTEST_SKIP() << "GPU counters are closed on this node: " << m.profile_error();
    FAIL() << "no counter profile: " << m.profile_error();
  }
  std::printf("%s\n", m.profile_error().c_str());
  for (const auto& [k, v] : p) std::printf("  %-80s %.4g\n", k.c_str(), v);
  EXPECT_GT(p.at("hw.passes"), 0);
  const double operand_bytes = 2.0 * 2 * 1024 * 1024;  // A and B, fp16
  if (p.contains("hw.lts__t_bytes.sum")) {
    EXPECT_GE(p.at("hw.lts__t_bytes.sum"), operand_bytes);
  }
  // The range holds the call, and more: its duration is a bound from below. The
  // busiest SM's active cycles at the range's clock are the kernels' time.
  const double device_us = m.timings().device().median_us();
  const double range_us = p.at("hw.gpu__time_duration.sum") * 1e-3;
  EXPECT_GT(range_us, 0.3 * device_us);
  ASSERT_TRUE(p.contains("hw.sm__cycles_active.max") && p.contains("hw.gpc__cycles_elapsed.max"));
  const double ghz = p.at("hw.gpc__cycles_elapsed.max") / (range_us * 1e3);
  const double kernel_us = p.at("hw.sm__cycles_active.max") / ghz * 1e-3;
  EXPECT_GT(kernel_us, 0.3 * device_us);
  EXPECT_LT(kernel_us, 3.0 * device_us);
  const std::string tensor = "hw.sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active";
  ASSERT_TRUE(p.contains(tensor));
  EXPECT_GT(p.at(tensor), 1.0);  // a 1024^3 wgmma GEMM keeps the tensor pipe busy
  EXPECT_LE(p.at(tensor), 100.0);
  ASSERT_TRUE(p.contains("hw.baseline_index"));
  EXPECT_TRUE(p.contains("hw.baseline.gpu__time_duration.sum"));
}

void CheckFolder(const std::string& folder, const std::function<std::vector<v1::Measurement>(
                                                const v1::Candidate&, const std::vector<v1::Shape>&)>& measure) {
  absl::StatusOr<std::vector<Fixture>> fixtures = LoadFixtures(TestsDir(), folder);
  ASSERT_TRUE(fixtures.ok()) << fixtures.status();
  for (const Fixture& f : *fixtures) {
    v1::Candidate c = FixtureCandidate(f);
    absl::StatusOr<v1::Build> b = Harness::builder_->Build(c);
    ASSERT_TRUE(b.ok()) << b.status();
    std::string verdict, reason;
    if (b->verdict() != v1::VERDICT_PASSED) {
      verdict = v1::Verdict_Name(b->verdict());
      reason = "build";
    } else {
      std::vector<v1::Measurement> ms = measure(c, {FixtureShape()});
      ASSERT_EQ(ms.size(), 1u) << f.name;
      verdict = v1::Verdict_Name(ms[0].verdict());
      reason = ms[0].reason();
      std::printf("%-28s %-20s %-24s %s\n", (f.name.substr(f.name.find('/') + 1) + ".cu").c_str(),
                  verdict.c_str(), reason.c_str(), ms[0].detail().substr(0, 100).c_str());
      EXPECT_TRUE(MeetsExpectation(f.expect, ms[0].verdict(), reason))
          << f.name << ": expected " << DescribeExpectation(f.expect) << ", got " << verdict << " " << reason;
    }
    EXPECT_NE(verdict, "VERDICT_PASSED") << f.name << " was not caught";
  }
  // The GPU is still usable: a correct kernel passes right after.
  absl::StatusOr<std::vector<SeedFamily>> seeds = Harness::Seeds();
  ASSERT_TRUE(seeds.ok() && !seeds->empty());
  std::vector<v1::Measurement> ok = measure(MakeSeedCandidate(seeds->front(), v1::LAYOUT_NT), {S(64, 64, 64)});
  ASSERT_EQ(ok.size(), 1u);
  EXPECT_EQ(ok[0].verdict(), v1::VERDICT_PASSED) << ok[0].reason() << " " << ok[0].detail();
}

// The autotuned cuBLASLt baseline: with no stored choice the runner tunes and
// returns its choice; given that choice it times with it and tunes nothing; given
// it marked retune, it tunes again with the stored choice among the contenders
// and returns a choice (the stored one or a faster one).
TEST_F(Harness, AStoredCublasLtChoiceIsTunedAgainOnlyWhenMarked) {
  absl::StatusOr<BuiltSeed> built = LastSeedNtBuilt();
  ASSERT_TRUE(built.ok()) << built.status();
  const v1::Candidate& c = built->candidate;
  const v1::Build& b = built->build;
  const std::vector<v1::Shape> shapes = {S(1000, 1000, 1000)};
  const auto auto_baseline = [](const RunnerResults& ev) {
    for (const v1::Baseline& x : ev.measurements.at(0).baselines())
      if (x.name() == "cublaslt_auto") return x;
    return v1::Baseline();
  };
  absl::StatusOr<RunnerResults> first = evaluator_->Measure(c, b, shapes, {});
  ASSERT_TRUE(first.ok()) << first.status();
  // One choice per figure it is compared by: device time and each graph regime.
  ASSERT_EQ(first->tuned.size(), 3u);
  EXPECT_EQ(first->tuned[0].figure(), "device");
  EXPECT_EQ(first->tuned[1].figure(), "graph-hot");
  EXPECT_EQ(first->tuned[2].figure(), "graph-cold");
  EXPECT_GE(auto_baseline(*first).algo_index(), 0);
  EXPECT_GE(auto_baseline(*first).algo_index_graph_hot(), 0);
  EXPECT_GE(auto_baseline(*first).algo_index_graph_cold(), 0);

  absl::StatusOr<RunnerResults> cached = evaluator_->Measure(c, b, shapes, first->tuned);
  ASSERT_TRUE(cached.ok()) << cached.status();
  EXPECT_TRUE(cached->tuned.empty());
  EXPECT_EQ(auto_baseline(*cached).algo_index(), -1);
  EXPECT_EQ(cached->measurements.at(0).verdict(), v1::VERDICT_PASSED);

  std::vector<v1::LtAlgo> stored = first->tuned;
  stored[0].set_retune(true);  // the device-time choice only
  absl::StatusOr<RunnerResults> retuned = evaluator_->Measure(c, b, shapes, stored);
  ASSERT_TRUE(retuned.ok()) << retuned.status();
  ASSERT_EQ(retuned->tuned.size(), 1u);
  EXPECT_EQ(retuned->tuned[0].figure(), "device");
  EXPECT_FALSE(retuned->tuned[0].retune());
  EXPECT_EQ(retuned->tuned[0].algo().size(), stored[0].algo().size());
  EXPECT_GE(auto_baseline(*retuned).algo_index(), 0);
  EXPECT_EQ(retuned->measurements.at(0).verdict(), v1::VERDICT_PASSED);
}

// The samples spread over protocol.operand_sets sets of operands (four by
// default), fewer where they would pass protocol.max_operand_bytes, never
// fewer than one; the measurement says how many it used.
TEST_F(Harness, SamplesSpreadOverOperandSetsWithinTheirMemoryBound) {
  absl::StatusOr<BuiltSeed> built = LastSeedNtBuilt();
  ASSERT_TRUE(built.ok()) << built.status();
  const v1::Shape shape = S(256, 128, 128);
  const int64_t set_bytes = 2 * (256 * 128 + 128 * 128 + 256 * 128);
  const auto sets_used = [&](int sets, int64_t max_bytes) {
    absl::StatusOr<Toolchain> t = Toolchain::Find();
    EXPECT_TRUE(t.ok()) << t.status();
    v1::RunnerProtocol p = FixtureProtocol();
    p.set_operand_sets(sets);
    p.set_max_operand_bytes(max_bytes);
    RunnerHost ev(RunnerOptionsWith(*t, p));
    absl::StatusOr<RunnerResults> got = ev.Measure(built->candidate, built->build, {shape}, {});
    EXPECT_TRUE(got.ok()) << got.status();
    if (!got.ok() || got->measurements.size() != 1) return -1.0;
    const v1::Measurement& m = got->measurements[0];
    EXPECT_EQ(m.verdict(), v1::VERDICT_PASSED) << m.reason() << " " << m.detail();
    auto it = m.profile().find("operand_sets");
    return it == m.profile().end() ? -1.0 : it->second;
  };
  EXPECT_EQ(sets_used(0, 0), 4);                     // the runner's defaults
  EXPECT_EQ(sets_used(3, 3 * set_bytes), 3);
  EXPECT_EQ(sets_used(3, 2 * set_bytes + 1), 2);    // the byte bound
  EXPECT_EQ(sets_used(3, set_bytes / 2), 1);        // never fewer than one
}

// The graph figures, for the candidate and every baseline: hot replays of at
// least 4 calls lasting about a millisecond, cold replays rotating through
// sets that together pass twice the L2, every set used equally often.
TEST_F(Harness, GraphReplayFiguresInBothRegimes) {
  absl::StatusOr<BuiltSeed> built = LastSeedNtBuilt();
  ASSERT_TRUE(built.ok()) << built.status();
  const v1::Shape shape = S(1000, 1000, 1000);
  absl::StatusOr<RunnerResults> ev = evaluator_->Measure(built->candidate, built->build, {shape}, {});
  ASSERT_TRUE(ev.ok()) << ev.status();
  ASSERT_TRUE(ev->info.has_value());
  const v1::Measurement& m = ev->measurements.at(0);
  ASSERT_EQ(m.verdict(), v1::VERDICT_PASSED) << m.reason() << " " << m.detail();
  EXPECT_EQ(m.graph_note(), "");
  const double set_bytes = 2.0 * (1000 * 1000 * 3);
  auto check = [&](const std::string& who, const v1::Timings& t) {
    SCOPED_TRACE(who);
    ASSERT_GT(t.graph_hot().median_us(), 0);
    ASSERT_GT(t.graph_cold().median_us(), 0);
    EXPECT_GE(t.graph_calls_hot(), 4);
    EXPECT_GE(t.graph_calls_hot() * t.graph_hot().median_us(), 500.0);  // about 1 ms a replay
    EXPECT_GT(t.graph_cold_sets() * set_bytes, 2.0 * ev->info->l2_bytes());
    EXPECT_EQ(t.graph_calls_cold() % t.graph_cold_sets(), 0);
    EXPECT_EQ(t.graph_hot().samples(), 2 * 3);  // rounds x graph_samples
  };
  check("candidate", m.timings());
  ASSERT_EQ(m.baselines_size(), 3);
  for (const v1::Baseline& b : m.baselines()) check(b.name(), b.timings());
  // Streaming operands from DRAM costs more than keeping them in L2.
  EXPECT_GT(m.timings().graph_cold().median_us(), 0.9 * m.timings().graph_hot().median_us());
  EXPECT_GT(m.profile().at("graph_hot_work_ratio"), 0.5);
  EXPECT_GT(m.profile().at("graph_cold_work_ratio"), 0.5);
}

TEST_F(Harness, BrokenVariantsAreCaughtWithTheRightReason) { CheckFolder("broken", &Harness::Measure); }
TEST_F(Harness, AdversarialCandidatesAreRejectedOrContained) { CheckFolder("adversarial", &Harness::Measure); }

}  // namespace
}  // namespace anvil
