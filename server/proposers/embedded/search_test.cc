// The whole embedded search (the proposer run by a JobService through
// RunSearch) on a test double of the evaluator: it finds and verifies each
// problem's best, compiles once and measures many, resumes from the store,
// and keeps to its budget. The stages' own tests are beside their files
// (*_stage_test.cc); the real evaluator and GPU are exercised by the device
// runs (bench/).
#include <unistd.h>

#include "server/proposers/embedded/search_test_fixture.h"

namespace anvil {
namespace {

TEST_F(SearchTest, FindsAndVerifiesTheBestItMeasuredPerProblem) {
  FakeGpuWorkerForTest w(TiledTestFamily());
  std::unique_ptr<Store> store = Open();
  std::vector<std::string> lines;
  absl::StatusOr<SearchResult> r = Search(w, *store, SearchOptions(), &lines);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->problems.size(), 3u);
  EXPECT_GT(r->measurements, 12);
  EXPECT_FALSE(r->budget_exhausted);
  for (const v1::ProblemProgress& p : r->problems) {
    ASSERT_FALSE(p.best_candidate_id().empty()) << ProblemName(p.problem());
    // The winner is the fastest of everything measured on the problem.
    absl::StatusOr<std::vector<StoredMeasurement>> h = store->SearchHistory(p.problem());
    ASSERT_TRUE(h.ok());
    double fastest = 1e30;
    for (const StoredMeasurement& m : *h) {
      if (m.measurement.verdict() == v1::VERDICT_PASSED) {
        fastest = std::min(fastest, m.measurement.timings().device().median_us());
      }
    }
    EXPECT_DOUBLE_EQ(p.best_us(), fastest);
    EXPECT_GT(p.candidates_tried(), 3);
    absl::StatusOr<std::optional<v1::Kernel>> best = store->BestKernel(p.problem(), "device");
    ASSERT_TRUE(best.ok() && best->has_value());
    EXPECT_EQ((*best)->candidate().id(), p.best_candidate_id());  // verified in the store
  }
  // The skinny long-K problem is won by a split-K configuration, and the
  // late raster knob was tuned by the evolve stage somewhere.
  absl::StatusOr<v1::Candidate> skinny = store->GetCandidate(r->problems[1].best_candidate_id());
  ASSERT_TRUE(skinny.ok());
  EXPECT_NE(skinny->params().at("SPLIT_K"), "1");
  bool tuned_late = false;
  for (const v1::ProblemProgress& p : r->problems) {
    tuned_late |= store->GetCandidate(p.best_candidate_id())->params().at("GROUP_M") == "1";
  }
  EXPECT_TRUE(tuned_late);
  // Compile once, measure many: every configuration built once at most;
  // each (configuration, problem) measured once, plus the winner's re-checks
  // (each in its own runner process) and the first measurement that learns the GPU.
  for (const auto& [id, n] : w.builds) EXPECT_EQ(n, 1) << id;
  int again = 0;
  for (const auto& [key, n] : w.measured) {
    EXPECT_LE(n, 1 + kVerifyRuns);
    again += n >= 2;
  }
  EXPECT_LE(again, 4);
  EXPECT_GT(r->build_failures, 0);
  EXPECT_FALSE(r->curve.empty());
  bool shown = false;
  for (const std::string& l : lines) shown |= l.find("->") != std::string::npos;
  EXPECT_TRUE(shown) << "no best-so-far progress line";
}

TEST_F(SearchTest, ResumesFromTheStoreWithoutMeasuringAnythingTwice) {
  std::unique_ptr<Store> store = Open();
  FakeGpuWorkerForTest first(TiledTestFamily());
  SearchOptions seeds_only;
  seeds_only.seeds_only = true;
  ASSERT_TRUE(Search(first, *store, seeds_only).ok());
  FakeGpuWorkerForTest second(TiledTestFamily());  // a new process: knows nothing
  absl::StatusOr<SearchResult> r = Search(second, *store, SearchOptions());
  ASSERT_TRUE(r.ok()) << r.status();
  for (const auto& [key, n] : second.measured) {
    // Seeds measured by the first run are not measured again (except the
    // one measurement that learns the GPU and the re-checks of winners).
    if (first.measured.count(key)) {
      EXPECT_LE(n, 2);
    }
  }
  int remeasured = 0;
  for (const auto& [key, n] : second.measured) remeasured += first.measured.count(key);
  EXPECT_LE(remeasured, 1 + 3);
  // A configuration that failed to build in the first run is not rebuilt.
  for (const auto& [id, n] : first.builds) {
    absl::StatusOr<std::optional<v1::Build>> b = store->LatestBuild(id);
    if (b.ok() && *b && (*b)->verdict() != v1::VERDICT_PASSED) {
      EXPECT_EQ(second.builds.count(id), 0u);
    }
  }
}

TEST_F(SearchTest, BudgetStopsTheSearchButStillVerifies) {
  std::unique_ptr<Store> store = Open();
  FakeGpuWorkerForTest w(TiledTestFamily());
  SearchOptions o;
  o.budget_seconds = 0;
  absl::StatusOr<SearchResult> r = Search(w, *store, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->budget_exhausted);
  EXPECT_LE(r->measurements, 2);
}

TEST(RunSearch, RefusesEmptyInput) {
  FakeGpuWorkerForTest w(TiledTestFamily());
  absl::StatusOr<std::unique_ptr<Store>> s =
      Store::Open(absl::StrCat(testing::TempDir(), "/search_empty_", getpid(), ".db"));
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(RunSearch({TiledTestFamily()}, {}, "j", w, **s, {}, [](const std::string&) {}).ok());
  EXPECT_FALSE(RunSearch({}, {{MakeShape(1, 1, 1), v1::LAYOUT_NT}}, "j", w, **s, {},
                         [](const std::string&) {}).ok());
}

TEST_F(SearchTest, AWarmFigureSearchMinimisesWarmTime) {
  std::unique_ptr<Store> store = Open();
  FakeGpuWorkerForTest w(TiledTestFamily());
  SearchOptions o;
  o.figure = "warm";
  absl::StatusOr<SearchResult> r = Search(w, *store, o);
  ASSERT_TRUE(r.ok()) << r.status();
  for (const v1::ProblemProgress& p : r->problems) {
    ASSERT_FALSE(p.best_candidate_id().empty()) << ProblemName(p.problem());
    absl::StatusOr<std::vector<StoredMeasurement>> h = store->SearchHistory(p.problem());
    ASSERT_TRUE(h.ok());
    double fastest = 1e30;
    for (const StoredMeasurement& m : *h) fastest = std::min(fastest, m.measurement.timings().warm().median_us());
    EXPECT_DOUBLE_EQ(p.best_us(), fastest) << ProblemName(p.problem());
    // The winner's warm time, not its device time (they differ by 5 us on split-K).
    absl::StatusOr<v1::Kernel> k = store->GetKernel(p.best_candidate_id(), p.problem(), "warm");
    ASSERT_TRUE(k.ok()) << k.status();
    EXPECT_DOUBLE_EQ(k->measurement().timings().warm().median_us(), p.best_us());
    EXPECT_DOUBLE_EQ(p.best_baseline_us(), FakeGpuWorkerForTest::BaselineUs(p.problem().shape()) + 2);
  }
  o.figure = "fastest";
  EXPECT_FALSE(Search(w, *store, o).ok());
}

TEST_F(SearchTest, StagesBeforeEvolveLeaveItsShareOfTheBudget) {
  // Unlimited, to count what stages 0-2 measure.
  std::unique_ptr<Store> probe_store = Open();
  FakeGpuWorkerForTest probe(TiledTestFamily());
  SearchOptions o;
  o.clock = [&probe] { return probe.Now(); };
  o.seeds_share = 0;  // every seed everywhere, whatever the budget: stages 0-2 as long as can be
  absl::StatusOr<SearchResult> all = Search(probe, *probe_store, o);
  ASSERT_TRUE(all.ok()) << all.status();
  double evolve_starts = 0;
  for (const CurvePoint& c : all->curve) {
    if (c.stage.rfind("evolve", 0) == 0) {
      evolve_starts = c.seconds - 1;
      break;
    }
  }
  ASSERT_GT(evolve_starts, 20);

  // A budget that stages 0-2 would spend alone.
  auto evolve_measurements = [&](double share, std::vector<std::string>* lines) {
    path_ += "x";
    std::filesystem::remove(path_);
    std::unique_ptr<Store> store = Open();
    FakeGpuWorkerForTest w(TiledTestFamily());
    SearchOptions limited;
    limited.clock = [&w] { return w.Now(); };
    limited.budget_seconds = evolve_starts * 0.8;
    limited.evolve_share = share;
    limited.seeds_share = 0;
    absl::StatusOr<SearchResult> r = Search(w, *store, limited, lines);
    EXPECT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(r->budget_exhausted);
    int n = 0;
    for (const CurvePoint& c : r->curve) {
      const bool evolving = c.stage.rfind("evolve", 0) == 0;
      n += evolving;
      // A stage stops between configurations: at most one configuration's shapes late.
      if (!evolving) {
        EXPECT_LE(c.seconds, limited.budget_seconds * (1 - share) + 3);
      }
    }
    for (const v1::ProblemProgress& p : r->problems) EXPECT_FALSE(p.best_candidate_id().empty());
    return n;
  };
  // Without a share, evolve gets only what stages 0-2 leave: the end of the
  // budget, where a batch of their screens would no longer finish in time.
  const int starved = evolve_measurements(0, nullptr);
  std::vector<std::string> lines;
  const int shared = evolve_measurements(0.4, &lines);
  EXPECT_GE(shared, 3);
  EXPECT_LT(starved, shared);
  bool said = false;
  for (const std::string& l : lines) said |= l.find("the rest is the evolve stage's") != std::string::npos;
  EXPECT_TRUE(said);
}

TEST_F(SearchTest, ABudgetCutLeavesAtMostTwoRoundsOfBuildsUnmeasured) {
  auto unmeasured = [&](int chunk, double budget) {
    path_ += "c";
    std::filesystem::remove(path_);
    std::unique_ptr<Store> store = Open();
    FakeGpuWorkerForTest w(TiledTestFamily());
    SearchOptions o;
    o.clock = [&w] { return w.Now(); };
    o.budget_seconds = budget;
    o.build_chunk = chunk;
    o.seeds_share = 0;  // the same plan at every budget
    absl::StatusOr<SearchResult> r = Search(w, *store, o);
    EXPECT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(r->budget_exhausted);
    std::set<std::string> measured;
    for (const auto& [key, n] : w.measured) measured.insert(std::get<0>(key));
    int n = 0;
    for (const std::string& id : w.built) n += !measured.count(id);
    return n;
  };
  int most_in_rounds = 0, most_at_once = 0;
  for (double budget = 20; budget <= 50; budget += 2) {
    most_in_rounds = std::max(most_in_rounds, unmeasured(2, budget));
    most_at_once = std::max(most_at_once, unmeasured(1000, budget));  // a stage's builds in one round
  }
  // A run can be cut twice: stages 0-2 at 70% of the budget, evolve at 100%;
  // each cut leaves the rest of the round being measured and the next round.
  EXPECT_GT(most_in_rounds, 0);
  EXPECT_LE(most_in_rounds, 2 * 2 * 2);
  EXPECT_GT(most_at_once, 2 * 2 * 2);
}

TEST_F(SearchTest, TheNextRoundBuildsWhileThisOneIsMeasured) {
  std::unique_ptr<Store> store = Open();
  FakeGpuWorkerForTest w(TiledTestFamily());
  w.overlap_wait = std::chrono::milliseconds(700);
  SearchOptions o;
  o.clock = [&w] { return w.Now(); };
  o.seeds_only = true;
  o.build_chunk = 1;
  absl::StatusOr<SearchResult> r = Search(w, *store, o);
  ASSERT_TRUE(r.ok()) << r.status();
  // Rounds of builds: the probe's (a seed of each layout, built together to
  // learn the GPU), then the seeds stage's, one per configuration. Each but
  // the first of each stage was seen under way by a measurement of the round
  // before it (the first of a stage too, where idle work rode beside its
  // build). Rounds built one after another, with the search waiting, would
  // have seen none.
  ASSERT_GE(w.build_calls, 3);
  EXPECT_GE(w.overlapped, w.build_calls - 2);
  EXPECT_LT(w.overlapped, w.build_calls);  // the probe's build had nothing to overlap
}

}  // namespace
}  // namespace anvil
