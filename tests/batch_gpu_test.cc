// Batches of candidates in one runner process (RunnerHost::MeasureBatch) on a
// real GPU: a screen of seed configurations shares each problem's baselines
// (in the process, and through the host with its later processes) and agrees
// with the full measurement's graph-cold figure; a hostile or
// broken candidate between two good ones gets the verdict it gets alone and
// leaves the good ones' verdicts and figures alone; a full measurement keeps
// every figure. Label: gpu.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include <google/protobuf/util/message_differencer.h>

#include "deploy/layout.h"
#include "proto/problem.h"
#include "sandbox/sandbox.h"
#include "seeds/seeds.h"
#include "seeds/space.h"
#include "tools/soak/fixtures.h"
#include "worker/builder.h"
#include "tests/gpu_fixture.h"
#include "worker/runner_host.h"


namespace anvil {
namespace {

// ANVIL_TESTS_DIR, else the bundle's (run from libexec/tests), else the source tree's.
using testing::TestsDir;

v1::Shape S(int m, int n, int k) { return MakeShape(m, n, k); }

const MeasureSpec kScreen{v1::FIDELITY_SCREEN, "graph-cold", ""};
const MeasureSpec kFull{v1::FIDELITY_FULL, "", ""};
// A job's screens: one runner stays up for batch after batch.
const MeasureSpec kWarmScreen{v1::FIDELITY_SCREEN, "graph-cold", "batch-test-job"};

class Batch : public ::testing::Test {
 public:
  static void SetUpTestSuite() {
    absl::StatusOr<Toolchain> t = Toolchain::Find();
    ASSERT_TRUE(t.ok()) << t.status();
    absl::StatusOr<std::unique_ptr<sandbox::ScratchDir>> dir = testing::NewScratch("batch-test-");
    ASSERT_TRUE(dir.ok()) << dir.status();
    scratch_ = dir->release();
    builder_ = testing::NewBuilder(*t, *scratch_).release();
    host_ = new RunnerHost(testing::RunnerOptionsIn(*t, *scratch_, FixtureProtocol()));
  }
  static void TearDownTestSuite() {
    delete host_;
    delete builder_;
    delete scratch_;
  }
  // An entry of a candidate that must build.
  static BatchEntry Built(const v1::Candidate& c, std::vector<v1::Shape> shapes) {
    BatchEntry e;
    e.candidate = c;
    absl::StatusOr<v1::Build> b = builder_->Build(c);
    EXPECT_TRUE(b.ok()) << b.status();
    if (b.ok()) e.build = *b;
    EXPECT_EQ(e.build.verdict(), v1::VERDICT_PASSED) << c.name() << ": " << e.build.error();
    e.shapes = std::move(shapes);
    return e;
  }
  // Every family's default NT configuration, and one neighbour of each
  // searchable family's that runs any shape.
  static std::vector<v1::Candidate> SeedConfigurations() {
    absl::StatusOr<std::vector<SeedFamily>> seeds =
        LoadSeeds(DefaultSeedsDir(deploy::ExecutableDir()));
    EXPECT_TRUE(seeds.ok()) << seeds.status();
    std::vector<v1::Candidate> out;
    if (!seeds.ok()) return out;
    for (const SeedFamily& f : *seeds) {
      if (std::find(f.layouts.begin(), f.layouts.end(), v1::LAYOUT_NT) == f.layouts.end()) continue;
      out.push_back(MakeSeedCandidate(f, v1::LAYOUT_NT));
      if (!f.searchable) continue;
      for (const KnobParams& n : Neighbours(f, v1::LAYOUT_NT, WithDefaults(f, {}))) {
        if (IsSpecialised(f, n)) continue;
        out.push_back(MakeSeedCandidate(f, v1::LAYOUT_NT, n));
        break;
      }
    }
    return out;
  }
  // The first and the last seed configuration, built, on `shapes`.
  static std::pair<BatchEntry, BatchEntry> FirstAndLastSeed(const std::vector<v1::Shape>& shapes) {
    const std::vector<v1::Candidate> seeds = SeedConfigurations();
    EXPECT_GE(seeds.size(), 2u);
    if (seeds.empty()) return {};
    return {Built(seeds.front(), shapes), Built(seeds.back(), shapes)};
  }
  // A host of its own (its own screened baselines and runner that stays up).
  static RunnerHostOptions HostOptions() {
    absl::StatusOr<Toolchain> t = Toolchain::Find();
    EXPECT_TRUE(t.ok()) << t.status();
    return testing::RunnerOptionsIn(t.ok() ? *t : Toolchain(), *scratch_, FixtureProtocol());
  }
  static absl::StatusOr<std::vector<RunnerResults>> Measure(const std::vector<BatchEntry>& entries,
                                                          const MeasureSpec& spec) {
    return host_->MeasureBatch(entries, spec, {});
  }
  static sandbox::ScratchDir* scratch_;
  static Builder* builder_;
  static RunnerHost* host_;
};
sandbox::ScratchDir* Batch::scratch_ = nullptr;
Builder* Batch::builder_ = nullptr;
RunnerHost* Batch::host_ = nullptr;

void ExpectEveryFigure(const std::string& who, const v1::Timings& t) {
  SCOPED_TRACE(who);
  EXPECT_GT(t.device().median_us(), 0);
  EXPECT_GT(t.cold().median_us(), 0);
  EXPECT_GT(t.warm().median_us(), 0);
  EXPECT_GT(t.call().median_us(), 0);
  EXPECT_GT(t.graph_hot().median_us(), 0);
  EXPECT_GT(t.graph_cold().median_us(), 0);
}

// Seed configurations screened on two problems in one batch: each passes with
// a graph-cold figure; every candidate of a problem carries the same
// baselines (timed once, by the problem's first screen); and a candidate's
// screened graph-cold median is within 10% of its full measurement's.
TEST_F(Batch, AScreenSharesEachProblemsBaselinesAndAgreesWithTheFullFigure) {
  const std::vector<v1::Shape> shapes = {S(1000, 1000, 1000), S(130, 200, 72)};
  std::vector<BatchEntry> entries;
  for (const v1::Candidate& c : SeedConfigurations()) entries.push_back(Built(c, shapes));
  ASSERT_GE(entries.size(), 3u);
  absl::StatusOr<std::vector<RunnerResults>> got = Measure(entries, kScreen);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), entries.size());
  for (size_t j = 0; j < shapes.size(); ++j) {
    const v1::Measurement* first = nullptr;
    for (size_t i = 0; i < entries.size(); ++i) {
      const std::string who = entries[i].candidate.name() + " " + ShapeName(shapes[j]);
      SCOPED_TRACE(who);
      ASSERT_EQ((*got)[i].measurements.size(), shapes.size());
      const v1::Measurement& m = (*got)[i].measurements[j];
      EXPECT_EQ(m.verdict(), v1::VERDICT_PASSED) << m.reason() << " " << m.detail();
      EXPECT_EQ(m.fidelity(), v1::FIDELITY_SCREEN);
      EXPECT_EQ(m.candidate_id(), entries[i].candidate.id());
      EXPECT_GT(m.timings().graph_cold().median_us(), 0);
      EXPECT_GT(m.timings().device().median_us(), 0);  // what the audits compare against
      EXPECT_FALSE(m.timings().has_graph_hot());
      EXPECT_FALSE(m.timings().has_warm());
      ASSERT_EQ(m.baselines_size(), 3);
      for (const v1::Baseline& b : m.baselines()) {
        EXPECT_GT(b.timings().graph_cold().median_us(), 0) << b.name();
        EXPECT_FALSE(b.timings().has_device()) << b.name();
      }
      if (first == nullptr) {
        first = &m;
        continue;
      }
      for (int b = 0; b < m.baselines_size(); ++b) {
        EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(m.baselines(b),
                                                                       first->baselines(b)))
            << "baseline " << m.baselines(b).name() << " differs from the problem's first screen";
      }
    }
  }
  // The full measurement of the last configuration (the fastest family) on both problems.
  const BatchEntry& last = entries.back();
  absl::StatusOr<std::vector<RunnerResults>> full = Measure({last}, kFull);
  ASSERT_TRUE(full.ok()) << full.status();
  ASSERT_EQ(full->size(), 1u);
  for (size_t j = 0; j < shapes.size(); ++j) {
    const v1::Measurement& f = full->at(0).measurements.at(j);
    const v1::Measurement& s = got->back().measurements.at(j);
    ASSERT_EQ(f.verdict(), v1::VERDICT_PASSED) << f.reason() << " " << f.detail();
    EXPECT_EQ(f.fidelity(), v1::FIDELITY_FULL);
    const double full_us = f.timings().graph_cold().median_us();
    const double screen_us = s.timings().graph_cold().median_us();
    std::printf("%s %s graph-cold: screen %.3f us, full %.3f us\n", last.candidate.name().c_str(),
                ShapeName(shapes[j]).c_str(), screen_us, full_us);
    EXPECT_NEAR(screen_us, full_us, 0.10 * full_us) << ShapeName(shapes[j]);
  }
}

// Every hostile and broken case between two good candidates, screened: it
// gets the verdict and reason it gets alone, and the good ones pass with a
// graph-cold figure, whatever it did to the process (a crash, a hang, a
// sticky error or changed process state restart the batch's rest). With
// kWarmScreen the batches follow each other in a runner that stays up while
// they leave it fit: each case meets the process the cases before it left.
void CheckFolderInBatches(const std::string& folder, const MeasureSpec& spec) {
  absl::StatusOr<std::vector<Fixture>> fixtures = LoadFixtures(TestsDir(), folder);
  ASSERT_TRUE(fixtures.ok()) << fixtures.status();
  std::vector<v1::Candidate> seeds = Batch::SeedConfigurations();
  ASSERT_GE(seeds.size(), 2u);
  const v1::Shape shape = FixtureShape();
  const BatchEntry before = Batch::Built(seeds.front(), {shape});
  const BatchEntry after = Batch::Built(seeds.back(), {shape});
  for (const Fixture& f : *fixtures) {
    SCOPED_TRACE(f.name);
    const v1::Candidate c = FixtureCandidate(f);
    absl::StatusOr<v1::Build> b = Batch::builder_->Build(c);
    ASSERT_TRUE(b.ok()) << b.status();
    if (b->verdict() != v1::VERDICT_PASSED) {  // refused before it could run: as alone
      std::printf("%-28s %s at build\n", f.name.c_str(), v1::Verdict_Name(b->verdict()).c_str());
      continue;
    }
    BatchEntry hostile;
    hostile.candidate = c;
    hostile.build = *b;
    hostile.shapes = {shape};
    absl::StatusOr<std::vector<RunnerResults>> got = Batch::Measure({before, hostile, after}, spec);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->size(), 3u);
    for (const RunnerResults& r : *got) ASSERT_EQ(r.measurements.size(), 1u);
    const v1::Measurement& m = (*got)[1].measurements[0];
    std::printf("%-28s %-20s %-24s %s\n", f.name.c_str(), v1::Verdict_Name(m.verdict()).c_str(),
                m.reason().c_str(), m.detail().substr(0, 100).c_str());
    EXPECT_TRUE(MeetsExpectation(f.expect, m.verdict(), m.reason()))
        << "expected " << DescribeExpectation(f.expect) << ", got "
        << v1::Verdict_Name(m.verdict()) << " " << m.reason() << ": " << m.detail();
    EXPECT_EQ(m.candidate_id(), c.id());
    for (size_t i : {0u, 2u}) {
      const v1::Measurement& good = (*got)[i].measurements[0];
      EXPECT_EQ(good.verdict(), v1::VERDICT_PASSED)
          << (i == 0 ? "before: " : "after: ") << good.reason() << " " << good.detail();
      EXPECT_EQ(good.fidelity(), v1::FIDELITY_SCREEN);
      EXPECT_GT(good.timings().graph_cold().median_us(), 0);
    }
  }
}

TEST_F(Batch, BrokenVariantsInABatchGetTheirVerdictAlone) { CheckFolderInBatches("broken", kScreen); }
TEST_F(Batch, AdversarialCandidatesInABatchGetTheirVerdictAlone) {
  CheckFolderInBatches("adversarial", kScreen);
}
TEST_F(Batch, BrokenVariantsInARunnerThatStaysUpGetTheirVerdictAlone) {
  CheckFolderInBatches("broken", kWarmScreen);
  host_->EndWarmRunner();
}
TEST_F(Batch, AdversarialCandidatesInARunnerThatStaysUpGetTheirVerdictAlone) {
  CheckFolderInBatches("adversarial", kWarmScreen);
  host_->EndWarmRunner();
}

// A job's screens, batch after batch, in one runner process: the later
// batches start no process and are charged no start-up, and their figures
// agree with a fresh process's screen of the same candidate.
TEST_F(Batch, AJobsBatchesShareOneRunnerThatStaysUp) {
  RunnerHost host(HostOptions());
  const auto [a, b] = FirstAndLastSeed({S(1000, 1000, 1000)});
  std::vector<double> warm_us;
  for (int round = 0; round < 3; ++round) {
    absl::StatusOr<std::vector<RunnerResults>> got = host.MeasureBatch({a, b}, kWarmScreen, {});
    ASSERT_TRUE(got.ok()) << got.status();
    for (const RunnerResults& r : *got) {
      EXPECT_EQ(r.runner_starts, round == 0 ? 1 : 0);
      const v1::Measurement& m = r.measurements.at(0);
      ASSERT_EQ(m.verdict(), v1::VERDICT_PASSED) << m.reason() << " " << m.detail();
      EXPECT_EQ(m.fidelity(), v1::FIDELITY_SCREEN);
      if (round > 0) {
        EXPECT_LT(m.profile().at("runner_s.process"), 0.2) << "no start-up charged";
      }
    }
    warm_us.push_back(got->at(1).measurements[0].timings().graph_cold().median_us());
  }
  host.EndWarmRunner();
  absl::StatusOr<std::vector<RunnerResults>> fresh = host.MeasureBatch({b}, kScreen, {});
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  const double fresh_us = fresh->at(0).measurements.at(0).timings().graph_cold().median_us();
  std::printf("%s 1000^3 graph-cold: warm runner %.3f / %.3f / %.3f us, fresh process %.3f us\n",
              b.candidate.name().c_str(), warm_us[0], warm_us[1], warm_us[2], fresh_us);
  for (double us : warm_us) EXPECT_NEAR(us, fresh_us, 0.10 * fresh_us);
}

// The baselines a screen timed in one runner process stand in for timing
// them in the host's later processes: the second call's screen carries the
// first's baseline records unchanged and says it timed none, while a full
// measurement times its own.
TEST_F(Batch, ALaterProcessScreensWithTheHostsBaselines) {
  RunnerHost host(HostOptions());
  const auto [a, b] = FirstAndLastSeed({S(384, 256, 512)});
  absl::StatusOr<std::vector<RunnerResults>> first = host.MeasureBatch({a}, kScreen, {});
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(host.screened_size(), 1u);
  absl::StatusOr<std::vector<RunnerResults>> second = host.MeasureBatch({b}, kScreen, {});
  ASSERT_TRUE(second.ok()) << second.status();
  const v1::Measurement& m1 = first->at(0).measurements.at(0);
  const v1::Measurement& m2 = second->at(0).measurements.at(0);
  ASSERT_EQ(m1.verdict(), v1::VERDICT_PASSED) << m1.reason() << " " << m1.detail();
  ASSERT_EQ(m2.verdict(), v1::VERDICT_PASSED) << m2.reason() << " " << m2.detail();
  ASSERT_EQ(m1.baselines_size(), 3);
  ASSERT_EQ(m2.baselines_size(), 3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(m1.baselines(i), m2.baselines(i)))
        << m2.baselines(i).name();
  }
  EXPECT_GT(m1.profile().at("runner_s.baselines"), 0);
  EXPECT_EQ(m2.profile().count("baseline_excess_err"), 1u);
  EXPECT_EQ(m2.profile().at("baseline_excess_err"), m1.profile().at("baseline_excess_err"));
  absl::StatusOr<std::vector<RunnerResults>> full = host.MeasureBatch({b}, kFull, {});
  ASSERT_TRUE(full.ok()) << full.status();
  const v1::Measurement& f = full->at(0).measurements.at(0);
  ASSERT_EQ(f.verdict(), v1::VERDICT_PASSED) << f.reason() << " " << f.detail();
  ASSERT_EQ(f.baselines_size(), 3);
  EXPECT_GT(f.baselines(0).timings().device().median_us(), 0);  // timed here, every figure
  EXPECT_FALSE(google::protobuf::util::MessageDifferencer::Equals(f.baselines(0), m1.baselines(0)));
}

// A full measurement is what it was before screens: every figure of the
// candidate and of each of the three baselines, labelled FULL, in a batch
// and in the single-candidate form alike.
TEST_F(Batch, AFullMeasurementKeepsEveryFigure) {
  const std::vector<v1::Candidate> seeds = SeedConfigurations();
  ASSERT_FALSE(seeds.empty());
  const BatchEntry first = Built(seeds.front(), {S(256, 128, 128)});
  const BatchEntry e = Built(seeds.back(), {S(256, 128, 128)});
  absl::StatusOr<std::vector<RunnerResults>> batch = Measure({first, e}, kFull);
  ASSERT_TRUE(batch.ok()) << batch.status();
  absl::StatusOr<RunnerResults> single = host_->Measure(e.candidate, e.build, e.shapes, {});
  ASSERT_TRUE(single.ok()) << single.status();
  std::vector<const v1::Measurement*> all = {&batch->at(0).measurements.at(0),
                                             &batch->at(1).measurements.at(0),
                                             &single->measurements.at(0)};
  for (const v1::Measurement* m : all) {
    ASSERT_EQ(m->verdict(), v1::VERDICT_PASSED) << m->reason() << " " << m->detail();
    EXPECT_EQ(m->fidelity(), v1::FIDELITY_FULL);
    EXPECT_GT(m->timings().first_call_us(), 0);
    ExpectEveryFigure("candidate", m->timings());
    ASSERT_EQ(m->baselines_size(), 3);
    for (const v1::Baseline& b : m->baselines()) ExpectEveryFigure(b.name(), b.timings());
  }
}

}  // namespace
}  // namespace anvil
