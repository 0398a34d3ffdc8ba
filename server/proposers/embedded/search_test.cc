// The search's logic (the embedded proposer, run by a JobService) on a test
// double of the evaluator: stages, compile once measure many, resume from the
// store, verification and its fallback. The real evaluator and GPU are
// exercised by the device runs (bench/).
#include "server/proposers/embedded/search.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>

#include "absl/strings/str_cat.h"
#include "proto/candidate.h"
#include "reward/reward.h"
#include "seeds/space.h"
#include "server/proposers/embedded/test_family.h"

namespace anvil {
namespace {

// A winner's verified re-measurements, each in its own runner process.
const int kVerifyRuns = SearchOptions().verify_runs;

// Test double of the evaluator: "builds" instantly (BM=64 with BN=256 fails
// to compile) and "measures" with a fixed synthetic time per configuration and
// shape; the coordinator stores what it returns. Each measured shape advances
// its clock by one second; builds take no time on it (the coordinator builds
// while it measures). Build runs on another thread than Measure, as with the
// real one.
class FakeGpuWorkerForTest : public CandidateEvaluator {
 public:
  explicit FakeGpuWorkerForTest(SeedFamily family) : family_(std::move(family)) {}

  std::vector<absl::StatusOr<v1::Build>> Build(const std::vector<v1::Candidate>& cs, const WorkContext&) override {
    std::unique_lock<std::mutex> lock(mu_);
    ++build_calls;
    if (overlap_wait.count() > 0) {
      building_ = true;
      cv_.notify_all();
      overlapped += cv_.wait_for(lock, overlap_wait, [&] { return seen_; });
      building_ = seen_ = false;
    }
    std::vector<absl::StatusOr<v1::Build>> out;
    batches.emplace_back();
    for (const v1::Candidate& c : cs) {
      ++builds[c.id()];
      batches.back().push_back(c.id());
      v1::Build b;
      b.set_candidate_id(c.id());
      b.set_arch(c.arch());
      const bool bad = c.params().at("BM") == "64" && c.params().at("BN") == "256";
      b.set_verdict(bad ? v1::VERDICT_COMPILE_ERROR : v1::VERDICT_PASSED);
      if (!bad) built.insert(c.id());
      if (bad) b.set_error("ptxas: too many resources requested");
      b.set_artifact("/nonexistent/candidate.so");
      out.push_back(b);
    }
    return out;
  }

  std::vector<absl::StatusOr<MeasureResult>> Measure(const std::vector<MeasureRequest>& rs,
                                                     const WorkContext&) override {
    std::vector<absl::StatusOr<MeasureResult>> out;
    for (const MeasureRequest& r : rs) out.push_back(MeasureOne(r.candidate, r.shapes));
    return out;
  }

  MeasureResult MeasureOne(const v1::Candidate& c, const std::vector<v1::Shape>& shapes) {
    MeasureResult out;
    if (overlap_wait.count() > 0) {
      std::unique_lock<std::mutex> lock(mu_);
      if (cv_.wait_for(lock, overlap_wait, [&] { return building_; })) {
        seen_ = true;
        cv_.notify_all();
      }
    }
    info_ = v1::RunnerInfo();
    info_->set_gpu(gpu);
    info_->set_arch("sm_90a");
    info_->set_sm_count(132);
    for (const v1::Shape& s : shapes) {
      const int n = ++measured[{c.id(), ShapeName(s), c.layout()}];
      v1::Measurement m;
      m.set_candidate_id(c.id());
      *m.mutable_problem() = MakeProblem(gpu, "sm_90a", s, c.layout());
      const bool flaky = c.id() == flaky_id && n > 1;
      const bool refused = (refuses_bm64 && c.params().at("BM") == "64") || !Fits(c, s);
      m.set_verdict(flaky     ? v1::VERDICT_INCORRECT
                    : refused ? v1::VERDICT_UNSUPPORTED
                              : v1::VERDICT_PASSED);
      if (flaky) m.set_reason("wrong_result");
      if (refused) m.set_reason("returned_error");
      // A lucky sample: the first measurement reads faster than the kernel runs.
      const double luck = c.id() == lucky_id && n == 1 ? lucky_factor : 1.0;
      // The graph-cold figure (the search's default) reads as the device
      // figure here; graph-hot a little faster.
      for (v1::TimingStats* t : {m.mutable_timings()->mutable_device(),
                                 m.mutable_timings()->mutable_graph_cold()}) {
        t->set_median_us(TrueUs(c, s) * luck);
      }
      m.mutable_timings()->mutable_graph_hot()->set_median_us(0.98 * TrueUs(c, s) * luck);
      m.mutable_timings()->mutable_warm()->set_median_us(WarmUs(c, s));
      v1::Baseline* b = m.add_baselines();
      b->set_name("cublas");
      for (v1::TimingStats* t : {b->mutable_timings()->mutable_device(),
                                 b->mutable_timings()->mutable_graph_cold()}) {
        t->set_median_us(BaselineUs(s) * baseline_factor);
      }
      b->mutable_timings()->mutable_graph_hot()->set_median_us(0.98 * BaselineUs(s) * baseline_factor);
      b->mutable_timings()->mutable_warm()->set_median_us(BaselineUs(s) * baseline_factor + 2);
      out.measurements.push_back(m);
      seconds += 1;
      out.gpu_seconds += 1;
    }
    return out;
  }

  std::optional<v1::RunnerInfo> device() const override { return info_; }

  // The model's estimate, with a twist it cannot know: GROUP_M=1 is 10%
  // faster (only the evolve stage moves late knobs).
  double TrueUs(const v1::Candidate& c, const v1::Shape& s) const {
    KnobParams p(c.params().begin(), c.params().end());
    absl::StatusOr<Estimate> e = Predict(family_, c.layout(), p, s, DeviceModel());
    const bool specialised = p.count("SHAPE_K") && p.at("SHAPE_K") != "0";
    return e->us * (p.at("GROUP_M") == "1" ? 0.9 : 1.0) * (specialised ? specialised_factor : 1.0);
  }
  // A configuration specialised to its problem runs specialised_factor x as long
  // as the general one; on any other shape it refuses to run (anvil_gemm's error).
  static bool Fits(const v1::Candidate& c, const v1::Shape& s) {
    for (const auto& [knob, dim] : {std::pair{"SHAPE_M", s.m()}, {"SHAPE_N", s.n()}, {"SHAPE_K", s.k()}}) {
      auto it = c.params().find(knob);
      if (it != c.params().end() && it->second != "0" && it->second != absl::StrCat(dim)) return false;
    }
    return true;
  }
  // Back to back, a split-K configuration pays its second launch: 5 us more.
  double WarmUs(const v1::Candidate& c, const v1::Shape& s) const {
    return TrueUs(c, s) + (c.params().at("SPLIT_K") != "1" ? 5.0 : 0.0);
  }
  static double BaselineUs(const v1::Shape& s) { return 2.0 * s.m() * s.n() * s.k() / 7e14 * 1e6 + 4; }

  std::map<std::string, int> builds;
  std::vector<std::vector<std::string>> batches;  // the candidates of each BuildAll
  std::set<std::string> built;  // builds that passed
  std::map<std::tuple<std::string, std::string, v1::Layout>, int> measured;
  // The search's clock (SearchOptions::clock): one second per measured shape.
  std::chrono::steady_clock::time_point Now() const {
    return std::chrono::steady_clock::time_point(
        std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds)));
  }

  double seconds = 0;
  // Overlap probe: with overlap_wait > 0, each BuildAll waits up to that long
  // for a Measure to see it under way, and each Measure up to that long for a
  // BuildAll to be; `overlapped` counts the BuildAll calls that were seen.
  std::chrono::milliseconds overlap_wait{0};
  int overlapped = 0;
  int build_calls = 0;
  std::string flaky_id;  // measures correctly once, then fails
  std::string lucky_id;  // its first measurement per shape reads lucky_factor x its time
  double lucky_factor = 0.6;
  bool refuses_bm64 = false;  // a host-side bug: every BM=64 configuration returns an error
  double specialised_factor = 0.95;
  double baseline_factor = 1.0;  // this worker's cuBLAS tuning: > 1 is a weak one
  std::string gpu = "FAKE-GPU";

 private:
  SeedFamily family_;
  std::optional<v1::RunnerInfo> info_;
  std::mutex mu_;  // guards what BuildAll writes, and the probe's state
  std::condition_variable cv_;
  bool building_ = false;  // a BuildAll is waiting to be seen
  bool seen_ = false;      // a Measure saw it
};

class SearchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = testing::TempDir() + "/search_test_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".db";
    std::filesystem::remove(path_);
    seeds_ = {TiledTestFamily()};
    problems_ = {{MakeShape(4096, 4096, 4096), v1::LAYOUT_NT},
                 {MakeShape(256, 64, 12288), v1::LAYOUT_NN},
                 {MakeShape(1000, 1000, 1000), v1::LAYOUT_NT}};
  }
  std::unique_ptr<Store> Open() {
    absl::StatusOr<std::unique_ptr<Store>> s = Store::Open(path_);
    EXPECT_TRUE(s.ok()) << s.status();
    return std::move(*s);
  }
  absl::StatusOr<SearchResult> Search(FakeGpuWorkerForTest& w, Store& store, SearchOptions o,
                                      std::vector<std::string>* lines = nullptr) {
    const std::string job = absl::StrCat("job-", ++jobs_);
    return RunSearch(seeds_, problems_, job, w, store, o, [&](const std::string& l) {
      if (lines) lines->push_back(l);
    });
  }
  // The configuration another GPU model ("OTHER-GPU") measured fastest on the
  // first problem in the transfer tests (the screen would not pick it first).
  v1::Candidate OtherGpusWinner() const {
    const KnobParams there{{"BM", "256"}, {"BN", "64"}, {"SPLIT_K", "2"}, {"GROUP_M", "1"}};
    v1::Candidate c = MakeSeedCandidate(seeds_[0], v1::LAYOUT_NT, WithDefaults(seeds_[0], there));
    c.set_proposer("embedded");
    return c;
  }
  // Stores the measurements of `c` on the first problem, made on OTHER-GPU.
  void MeasureOnOtherGpu(const v1::Candidate& c, Store& store) {
    FakeGpuWorkerForTest other(TiledTestFamily());
    other.gpu = "OTHER-GPU";
    std::vector<absl::StatusOr<v1::Build>> b = other.Build({c}, {});
    ASSERT_TRUE(b[0].ok());
    const MeasureResult m = other.MeasureOne(c, {problems_[0].shape});
    ASSERT_TRUE(store.PutCandidate(c).ok());
    ASSERT_TRUE(store.PutBuild(*b[0]).ok());
    ASSERT_TRUE(store.PutMeasurements(m.measurements).ok());
  }
  // Searches 4096x4096x4096 nt alone, with the default options; its winner.
  v1::ProblemProgress SearchAlone(FakeGpuWorkerForTest& w, Store& store) {
    problems_ = {{MakeShape(4096, 4096, 4096), v1::LAYOUT_NT}};
    absl::StatusOr<SearchResult> r = Search(w, store, SearchOptions());
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() && !r->problems.empty() ? r->problems[0] : v1::ProblemProgress();
  }
  std::string path_;
  std::vector<SeedFamily> seeds_;
  std::vector<ShapeSpec> problems_;
  int jobs_ = 0;
};

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

TEST_F(SearchTest, AWinnerThatFailsItsRecheckFallsBackToTheNext) {
  std::unique_ptr<Store> store = Open();
  FakeGpuWorkerForTest probe(TiledTestFamily());
  problems_ = {{MakeShape(4096, 4096, 4096), v1::LAYOUT_NT}};
  SearchOptions o;
  absl::StatusOr<SearchResult> r = Search(probe, *store, o);
  ASSERT_TRUE(r.ok());
  const std::string winner = r->problems[0].best_candidate_id();
  // Same search on a fresh store, with the winner failing its re-check.
  path_ += ".2";
  std::filesystem::remove(path_);
  std::unique_ptr<Store> fresh = Open();
  FakeGpuWorkerForTest w(TiledTestFamily());
  w.flaky_id = winner;
  absl::StatusOr<SearchResult> again = Search(w, *fresh, o);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->problems[0].best_candidate_id().empty());
  EXPECT_NE(again->problems[0].best_candidate_id(), winner);
  EXPECT_GE(again->problems[0].best_us(), r->problems[0].best_us());
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

TEST_F(SearchTest, WinnersComeFromTodaysSourceAndCarryTheOldLeadersOver) {
  std::unique_ptr<Store> store = Open();
  FakeGpuWorkerForTest w(TiledTestFamily());
  absl::StatusOr<SearchResult> first = Search(w, *store, SearchOptions());
  ASSERT_TRUE(first.ok()) << first.status();
  std::set<std::string> old_winners;
  for (const v1::ProblemProgress& p : first->problems) old_winners.insert(p.best_candidate_id());

  // The family's source changes: every candidate id changes with it.
  seeds_[0].source += "// v2\n";
  FakeGpuWorkerForTest w2(TiledTestFamily());
  std::vector<std::string> lines;
  absl::StatusOr<SearchResult> second = Search(w2, *store, SearchOptions(), &lines);
  ASSERT_TRUE(second.ok()) << second.status();
  bool carried = false, skipped = false;
  for (const std::string& l : lines) {
    carried |= l.find("[carry] 9 configurations from FAKE-GPU") != std::string::npos;
    // 6 (seed configuration, problem) pairs, less the one that learns the GPU.
    skipped |= l.find("[seeds] 5 (configuration, problem) pairs skipped") != std::string::npos;
  }
  EXPECT_TRUE(carried);
  EXPECT_TRUE(skipped);
  for (const v1::ProblemProgress& p : second->problems) {
    ASSERT_FALSE(p.best_candidate_id().empty());
    EXPECT_FALSE(old_winners.count(p.best_candidate_id()));
    absl::StatusOr<v1::Candidate> c = store->GetCandidate(p.best_candidate_id());
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c->source(), seeds_[0].source);
  }
  // Each old winner's configuration, rebuilt from today's source, was measured.
  for (const std::string& id : old_winners) {
    absl::StatusOr<v1::Candidate> old = store->GetCandidate(id);
    ASSERT_TRUE(old.ok());
    const v1::Candidate now = MakeSeedCandidate(seeds_[0], old->layout(),
                                                KnobParams(old->params().begin(), old->params().end()));
    bool measured = false;
    for (const auto& [key, n] : w2.measured) measured |= std::get<0>(key) == now.id();
    EXPECT_TRUE(measured) << old->name();
  }
}

TEST_F(SearchTest, AConfigurationThatFailedUnderAnEarlierSourceIsMeasuredAgainAfterTheFix) {
  std::unique_ptr<Store> store = Open();
  FakeGpuWorkerForTest broken(TiledTestFamily());
  broken.refuses_bm64 = true;  // the suggested BM=64 BN=64 fails on every problem
  ASSERT_TRUE(Search(broken, *store, SearchOptions()).ok());

  seeds_[0].source += "// the fix\n";
  FakeGpuWorkerForTest fixed(TiledTestFamily());
  std::vector<std::string> lines;
  ASSERT_TRUE(Search(fixed, *store, SearchOptions(), &lines).ok());
  // Only the default configuration's pairs are skipped (less the one that
  // learns the GPU): a failure says nothing about today's source.
  bool skipped = false;
  for (const std::string& l : lines)
    skipped |= l.find("[seeds] 2 (configuration, problem) pairs skipped") != std::string::npos;
  EXPECT_TRUE(skipped);
  const v1::Candidate suggested =
      MakeSeedCandidate(seeds_[0], v1::LAYOUT_NT, {{"BM", "64"}, {"BN", "64"}});
  int problems = 0;
  for (const auto& [key, n] : fixed.measured)
    problems += std::get<0>(key) == suggested.id() ? 1 : 0;
  EXPECT_EQ(problems, 2);  // the two NT problems, each once
}

TEST_F(SearchTest, TransferMeasuresAnotherGpusWinnersFirstWithoutMixingResults) {
  std::unique_ptr<Store> store = Open();
  // On another GPU model, a configuration the screen would not pick first was
  // measured fast on the first problem; an unknown family's was faster still.
  const v1::Candidate transferred = OtherGpusWinner();
  v1::Candidate stranger = transferred;
  stranger.set_family("98_gone");
  stranger.set_id(std::string(64, 'e'));
  for (const v1::Candidate& c : {transferred, stranger}) MeasureOnOtherGpu(c, *store);

  FakeGpuWorkerForTest w(TiledTestFamily());
  SearchOptions o;
  o.transfer_from = "OTHER-GPU";
  std::vector<std::string> lines;
  absl::StatusOr<SearchResult> r = Search(w, *store, o, &lines);
  ASSERT_TRUE(r.ok()) << r.status();
  bool announced = false;
  for (const std::string& l : lines) {
    announced |= l.find("[transfer] 1 configurations from OTHER-GPU for 3 problems") != std::string::npos;
  }
  EXPECT_TRUE(announced);
  // Measured here, on the problem it won there.
  EXPECT_EQ((w.measured[{transferred.id(), "4096x4096x4096", v1::LAYOUT_NT}]), 1);
  // Nothing measured on OTHER-GPU counts here: every measurement of this
  // GPU's problems was made by this GPU's worker.
  for (const v1::ProblemProgress& p : r->problems) {
    EXPECT_EQ(p.problem().gpu(), "FAKE-GPU");
    absl::StatusOr<std::vector<StoredMeasurement>> h = store->SearchHistory(p.problem());
    ASSERT_TRUE(h.ok());
    int here = 0;
    for (const auto& [key, n] : w.measured) {
      if (std::get<1>(key) == ShapeName(p.problem().shape()) && std::get<2>(key) == p.problem().layout()) here += n;
    }
    EXPECT_EQ(static_cast<int>(h->size()), here) << ProblemName(p.problem());
  }
}

// The transfer stage comes before the seeds: on a GPU model new to the store,
// a budget the seeds alone would spend still measures the other GPU's winners.
TEST_F(SearchTest, TransferRunsBeforeTheSeedsSoAShortBudgetKeepsIt) {
  std::unique_ptr<Store> store = Open();
  const v1::Candidate transferred = OtherGpusWinner();
  MeasureOnOtherGpu(transferred, *store);

  FakeGpuWorkerForTest w(TiledTestFamily());
  SearchOptions o;
  o.transfer_from = "OTHER-GPU";
  o.clock = [&w] { return w.Now(); };
  o.budget_seconds = 3;  // learning the GPU and the transfer take 2 of the 2.1 before evolve
  std::vector<std::string> lines;
  absl::StatusOr<SearchResult> r = Search(w, *store, o, &lines);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->budget_exhausted);
  EXPECT_GE((w.measured[{transferred.id(), "4096x4096x4096", v1::LAYOUT_NT}]), 1);
  // The seeds stage was cut: some seed configuration was never measured.
  int seed_pairs = 0;
  for (const auto& [key, n] : w.measured) seed_pairs += std::get<0>(key) != transferred.id();
  EXPECT_LT(seed_pairs, 6);
  const auto at = [&](const std::string& text) {
    return std::find_if(lines.begin(), lines.end(),
                        [&](const std::string& l) { return l.find(text) != std::string::npos; });
  };
  EXPECT_LT(at("[transfer] 1 configurations from OTHER-GPU"), at("budget"));
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

TEST_F(SearchTest, ReportsTheWinnersFreshReMeasurementNotItsLuckyOne) {
  std::unique_ptr<Store> probe_store = Open();
  FakeGpuWorkerForTest probe(TiledTestFamily());
  const v1::ProblemProgress honest = SearchAlone(probe, *probe_store);
  const std::string winner = honest.best_candidate_id();
  const double true_us = honest.best_us();

  // The same search on a fresh store, with the winner's first measurement lucky.
  path_ += ".lucky";
  std::filesystem::remove(path_);
  std::unique_ptr<Store> store = Open();
  FakeGpuWorkerForTest w(TiledTestFamily());
  w.lucky_id = winner;
  std::vector<std::string> lines;
  absl::StatusOr<SearchResult> r = Search(w, *store, SearchOptions(), &lines);
  ASSERT_TRUE(r.ok()) << r.status();
  const v1::ProblemProgress& p = r->problems[0];
  EXPECT_EQ(p.best_candidate_id(), winner);
  EXPECT_DOUBLE_EQ(p.best_us(), true_us);  // not 0.6 x
  EXPECT_DOUBLE_EQ(p.speedup(), p.best_baseline_us() / true_us);
  bool shown = false;
  for (const std::string& l : lines) shown |= l.find("re-measured") != std::string::npos;
  EXPECT_TRUE(shown);
  // The store's verified row is the re-measurement: what the kernel listings show.
  absl::StatusOr<std::optional<v1::Kernel>> best = store->BestKernel(p.problem(), "device");
  ASSERT_TRUE(best.ok() && best->has_value());
  EXPECT_EQ((*best)->candidate().id(), winner);
  EXPECT_DOUBLE_EQ((*best)->measurement().timings().device().median_us(), true_us);
  absl::StatusOr<v1::Kernel> k = store->GetKernel(winner, p.problem(), "device");
  ASSERT_TRUE(k.ok());
  EXPECT_DOUBLE_EQ(k->measurement().timings().device().median_us(), true_us);

  // A resumed run keeps the winner and reports its own re-measurements of it
  // (kVerifyRuns runner processes); nothing else is measured twice.
  FakeGpuWorkerForTest again(TiledTestFamily());
  absl::StatusOr<SearchResult> resumed = Search(again, *store, SearchOptions());
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(resumed->problems[0].best_candidate_id(), winner);
  EXPECT_DOUBLE_EQ(resumed->problems[0].best_us(), true_us);
  for (const auto& [key, n] : again.measured) {
    if (std::get<0>(key) != winner) {
      EXPECT_EQ(n, 1) << std::get<0>(key);
    }
  }
  EXPECT_EQ((again.measured[{winner, "4096x4096x4096", v1::LAYOUT_NT}]), kVerifyRuns);
  // Its spread over those runs is stored with it.
  absl::StatusOr<std::optional<v1::Kernel>> kept = store->BestKernel(p.problem(), "graph-cold");
  ASSERT_TRUE(kept.ok() && kept->has_value());
  bool has_spread = false;
  for (const v1::SpeedupSpread& sp : (*kept)->spreads()) {
    has_spread |= sp.figure() == "graph-cold" && sp.runs() >= kVerifyRuns;
  }
  EXPECT_TRUE(has_spread);
}

// The speedup pairs a kernel with the baselines of its own process, and those
// move between runs (on the H100 cuBLASLt's tuning of 1000^3 kept 8.0 us in
// one run and 6.9 in the next). A job reports its winners against its own.
TEST_F(SearchTest, AJobReportsItsWinnersAgainstItsOwnBaselines) {
  std::unique_ptr<Store> store = Open();
  FakeGpuWorkerForTest weak(TiledTestFamily());
  weak.baseline_factor = 1.25;  // a weak tuning in the first run's runners
  absl::StatusOr<SearchResult> first = Search(weak, *store, SearchOptions());
  ASSERT_TRUE(first.ok()) << first.status();
  FakeGpuWorkerForTest strong(TiledTestFamily());
  absl::StatusOr<SearchResult> second = Search(strong, *store, SearchOptions());
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_EQ(second->problems.size(), problems_.size());
  for (size_t i = 0; i < problems_.size(); ++i) {
    const v1::ProblemProgress& a = first->problems[i];
    const v1::ProblemProgress& b = second->problems[i];
    const v1::Shape& s = b.problem().shape();
    ASSERT_FALSE(b.best_candidate_id().empty()) << ProblemName(b.problem());
    EXPECT_DOUBLE_EQ(a.best_baseline_us(), FakeGpuWorkerForTest::BaselineUs(s) * 1.25);
    EXPECT_DOUBLE_EQ(b.best_baseline_us(), FakeGpuWorkerForTest::BaselineUs(s));
    EXPECT_NEAR(b.speedup(), a.speedup() / 1.25, 1e-9) << ProblemName(b.problem());
    // The winner was measured in this job, and the job's kernel listing is that measurement.
    EXPECT_GE((strong.measured[{b.best_candidate_id(), ShapeName(s), b.problem().layout()}]), 1);
    // Winners this run had not built were built together, in the last BuildAll
    // (the worker's parallel nvcc jobs), not one at a time.
    if (strong.builds[b.best_candidate_id()] > 0 && !strong.batches.empty()) {
      const std::vector<std::string>& last = strong.batches.back();
      EXPECT_NE(std::find(last.begin(), last.end(), b.best_candidate_id()), last.end());
      EXPECT_GE(last.size(), 2u);
    }
    absl::StatusOr<v1::Kernel> k = store->GetKernel(b.best_candidate_id(), b.problem(), "device", "job-2");
    ASSERT_TRUE(k.ok()) << k.status();
    EXPECT_TRUE(k->measurement().verified());
    EXPECT_DOUBLE_EQ(BestBaselineUs(k->measurement(), "device"), b.best_baseline_us());
  }
}

TEST_F(SearchTest, StagesBeforeEvolveLeaveItsShareOfTheBudget) {
  // Unlimited, to count what stages 0-2 measure.
  std::unique_ptr<Store> probe_store = Open();
  FakeGpuWorkerForTest probe(TiledTestFamily());
  SearchOptions o;
  o.clock = [&probe] { return probe.Now(); };
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
  EXPECT_EQ(evolve_measurements(0, nullptr), 0);  // evolve starved
  std::vector<std::string> lines;
  EXPECT_GE(evolve_measurements(0.4, &lines), 3);
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

TEST_F(SearchTest, ASuggestionThatIsTheDefaultIsMeasuredOncePerProblem) {
  seeds_[0].suggested.push_back({{"BM", "128"}, {"BN", "128"}});  // the family's default
  std::unique_ptr<Store> store = Open();
  FakeGpuWorkerForTest w(seeds_[0]);
  SearchOptions o;
  o.seeds_only = true;
  absl::StatusOr<SearchResult> r = Search(w, *store, o);
  ASSERT_TRUE(r.ok()) << r.status();
  // The two seed configurations of each layout on its problems (one nn, two
  // nt), each measured once; the verify stage's re-measurements come after.
  EXPECT_EQ(r->measurements, 2 * 3);
  for (const auto& [key, n] : w.measured) {
    EXPECT_LE(n, 1 + kVerifyRuns) << std::get<0>(key) << " on " << std::get<1>(key);
  }
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
  // Rounds of builds: the first seed (built alone, to learn the GPU), then
  // the seeds stage's, one per configuration. Each but the first of each
  // stage was seen under way by a measurement of the round before it. Rounds
  // built one after another, with the search waiting, would have seen none.
  ASSERT_GE(w.build_calls, 4);
  EXPECT_EQ(w.overlapped, w.build_calls - 2);
}

TEST_F(SearchTest, AnEarlierWinnerWhoseReMeasurementWasFasterStaysTheReportedOne) {
  problems_ = {{MakeShape(4096, 4096, 4096), v1::LAYOUT_NT}};
  SearchOptions seeds_only;
  seeds_only.seeds_only = true;
  // Probe: the seeds' winner W, then what a full search measures after it.
  std::unique_ptr<Store> probe_store = Open();
  FakeGpuWorkerForTest p1(TiledTestFamily()), p2(TiledTestFamily());
  absl::StatusOr<SearchResult> seeds = Search(p1, *probe_store, seeds_only);
  ASSERT_TRUE(seeds.ok()) << seeds.status();
  const std::string w = seeds->problems[0].best_candidate_id();
  const double w_us = seeds->problems[0].best_us();
  ASSERT_TRUE(Search(p2, *probe_store, SearchOptions()).ok());
  absl::StatusOr<std::vector<StoredMeasurement>> h = probe_store->SearchHistory(seeds->problems[0].problem());
  ASSERT_TRUE(h.ok());
  double fastest = 1e30, y_us = 0;
  std::string y;  // a kernel slower than W that only the full search measures
  for (const StoredMeasurement& m : *h) {
    const double us = m.measurement.timings().device().median_us();
    if (m.measurement.verdict() != v1::VERDICT_PASSED) continue;
    fastest = std::min(fastest, us);
    if (us > w_us && !p1.measured.count({m.measurement.candidate_id(), "4096x4096x4096", v1::LAYOUT_NT})) {
      y = m.measurement.candidate_id();
      y_us = us;
    }
  }
  ASSERT_FALSE(y.empty());

  // Again on a fresh store: W verified by the seeds run, then Y's first
  // measurement lucky enough to be selected; its re-measurement is slower than W's.
  path_ += ".again";
  std::filesystem::remove(path_);
  std::unique_ptr<Store> store = Open();
  FakeGpuWorkerForTest a(TiledTestFamily()), b(TiledTestFamily());
  ASSERT_TRUE(Search(a, *store, seeds_only).ok());
  b.lucky_id = y;
  b.lucky_factor = 0.9 * fastest / y_us;
  absl::StatusOr<SearchResult> r = Search(b, *store, SearchOptions());
  ASSERT_TRUE(r.ok()) << r.status();
  // Y was selected: measured once (lucky), then re-measured by the verify stage.
  EXPECT_EQ((b.measured[{y, "4096x4096x4096", v1::LAYOUT_NT}]), 1 + kVerifyRuns);
  EXPECT_EQ(r->problems[0].best_candidate_id(), w);
  EXPECT_DOUBLE_EQ(r->problems[0].best_us(), w_us);
  absl::StatusOr<std::optional<v1::Kernel>> best = store->BestKernel(r->problems[0].problem(), "device");
  ASSERT_TRUE(best.ok() && best->has_value());
  EXPECT_EQ((*best)->candidate().id(), w);
}

TEST_F(SearchTest, AVerifiedWinnerThatFailsLaterIsNotReported) {
  std::unique_ptr<Store> store = Open();
  FakeGpuWorkerForTest first(TiledTestFamily());
  const v1::ProblemProgress before = SearchAlone(first, *store);
  const std::string w = before.best_candidate_id();
  // Another worker's re-check of W fails (a flaky kernel).
  v1::Measurement bad;
  bad.set_candidate_id(w);
  *bad.mutable_problem() = before.problem();
  bad.set_verdict(v1::VERDICT_INCORRECT);
  bad.set_reason("wrong_result");
  const std::vector<v1::Measurement> failing = {bad};
  ASSERT_TRUE(store->PutMeasurements(failing, std::nullopt).ok());
  FakeGpuWorkerForTest second(TiledTestFamily());
  absl::StatusOr<SearchResult> again = Search(second, *store, SearchOptions());
  ASSERT_TRUE(again.ok()) << again.status();
  // The next fastest takes its place, verified.
  EXPECT_FALSE(again->problems[0].best_candidate_id().empty());
  EXPECT_NE(again->problems[0].best_candidate_id(), w);
  EXPECT_GE(again->problems[0].best_us(), before.best_us());
}

// A seed suggestion whose split-K partials exceed the workspace cap on a problem
// is not sent there (the runner would refuse it unrun); the others still are.
TEST_F(SearchTest, SeedsStageSkipsProblemsWhereTheWorkspaceWouldNotFit) {
  seeds_[0].suggested.push_back({{"BM", "64"}, {"BN", "64"}, {"SPLIT_K", "16"}});
  std::unique_ptr<Store> store = Open();
  FakeGpuWorkerForTest w(seeds_[0]);
  SearchOptions o;
  o.seeds_only = true;
  // 16 slabs of 256x64 floats (and 16 spare bytes) fit; 16 of 4096x4096 or
  // 1000x1000 do not.
  o.max_workspace_bytes = 16.0 * 256 * 64 * 4 + 16;
  ASSERT_TRUE(Search(w, *store, o).ok());
  std::set<std::string> split_on;
  for (const auto& [key, n] : w.measured) {
    absl::StatusOr<v1::Candidate> c = store->GetCandidate(std::get<0>(key));
    ASSERT_TRUE(c.ok());
    if (c->params().at("SPLIT_K") == "16") split_on.insert(std::get<1>(key));
  }
  EXPECT_EQ(split_on, std::set<std::string>{"256x64x12288"});
}

// Evolve stops after evolve_patience generations in a row improve no problem's
// best, each generation measuring the leaders' next-ranked neighbours: with
// patience 1 it stops at the first idle generation, with 3 it goes on.
TEST_F(SearchTest, EvolveStopsAfterPatienceIdleGenerationsInARow) {
  const auto last_generation = [](const std::vector<std::string>& lines) {
    int last = 0;
    for (const std::string& l : lines) {
      const size_t at = l.find("[evolve-");
      if (at != std::string::npos) last = std::max(last, std::atoi(l.c_str() + at + 8));
    }
    return last;
  };
  SearchOptions o;
  o.generations = 40;
  o.evolve_patience = 1;
  std::vector<std::string> lines1;
  FakeGpuWorkerForTest w1(TiledTestFamily());
  std::unique_ptr<Store> store1 = Open();
  ASSERT_TRUE(Search(w1, *store1, o, &lines1).ok());
  const int stopped1 = last_generation(lines1);
  ASSERT_GE(stopped1, 1);
  ASSERT_LT(stopped1, o.generations) << "patience 1 did not stop on an idle generation";

  store1.reset();
  std::filesystem::remove(path_);
  o.evolve_patience = 3;
  std::vector<std::string> lines3;
  FakeGpuWorkerForTest w3(TiledTestFamily());
  std::unique_ptr<Store> store3 = Open();
  ASSERT_TRUE(Search(w3, *store3, o, &lines3).ok());
  // The same generations up to the first idle one, then more: two, or fewer where
  // the leaders' neighbours run out (this family's do after one).
  EXPECT_GT(last_generation(lines3), stopped1);
  size_t measured1 = 0, measured3 = 0;
  for (const auto& [key, n] : w1.measured) measured1 += n;
  for (const auto& [key, n] : w3.measured) measured3 += n;
  EXPECT_GT(measured3, measured1);
}

// Stage 3 rebuilds each problem's general leaders with its shape fixed; they
// are measured on their own problem only, win where they are faster, and
// evolve moves around a specialised leader stay specialised. A rerun builds
// none of them again.
TEST_F(SearchTest, SpecialisesEachProblemsLeadersForItAlone) {
  seeds_ = {SpecialisableTestFamily()};
  std::unique_ptr<Store> store = Open();
  FakeGpuWorkerForTest w(SpecialisableTestFamily());
  std::vector<std::string> lines;
  absl::StatusOr<SearchResult> r = Search(w, *store, SearchOptions(), &lines);
  ASSERT_TRUE(r.ok()) << r.status();
  bool announced = false;
  for (const std::string& l : lines) announced |= l.find("[specialise]") != std::string::npos;
  EXPECT_TRUE(announced);
  int specialised = 0;
  for (const auto& [key, n] : w.measured) {
    absl::StatusOr<v1::Candidate> c = store->GetCandidate(std::get<0>(key));
    ASSERT_TRUE(c.ok());
    if (!c->params().count("SHAPE_M")) continue;
    ++specialised;
    EXPECT_EQ(absl::StrCat(c->params().at("SHAPE_M"), "x", c->params().at("SHAPE_N"), "x",
                           c->params().at("SHAPE_K")),
              std::get<1>(key))
        << "a specialised configuration measured on another problem";
  }
  EXPECT_GE(specialised, static_cast<int>(problems_.size()));
  for (const v1::ProblemProgress& p : r->problems) {
    absl::StatusOr<v1::Candidate> best = store->GetCandidate(p.best_candidate_id());
    ASSERT_TRUE(best.ok());
    EXPECT_EQ(best->params().count("SHAPE_K"), 1u) << ProblemName(p.problem()) << " " << best->name();
    absl::StatusOr<std::vector<StoredMeasurement>> h = store->SearchHistory(p.problem());
    ASSERT_TRUE(h.ok());
    for (const StoredMeasurement& m : *h) EXPECT_EQ(m.measurement.verdict(), v1::VERDICT_PASSED);
  }

  // The rerun's verify stage re-measures each winner, so builds it (on a real
  // worker a hit in the build cache); nothing else specialised is built again.
  FakeGpuWorkerForTest again(SpecialisableTestFamily());
  absl::StatusOr<SearchResult> rerun = Search(again, *store, SearchOptions());
  ASSERT_TRUE(rerun.ok()) << rerun.status();
  std::set<std::string> winners;
  for (const v1::ProblemProgress& p : rerun->problems) winners.insert(p.best_candidate_id());
  for (const std::string& id : again.built) {
    absl::StatusOr<v1::Candidate> c = store->GetCandidate(id);
    ASSERT_TRUE(c.ok());
    EXPECT_TRUE(w.built.count(id) == 0 || !c->params().count("SHAPE_K") || winners.count(id))
        << c->name() << " specialised and built again";
  }

  // Without the stage, nothing is specialised.
  path_ += ".off.db";
  std::filesystem::remove(path_);
  std::unique_ptr<Store> fresh = Open();
  FakeGpuWorkerForTest plain(SpecialisableTestFamily());
  SearchOptions off;
  off.specialise_per_problem = 0;
  ASSERT_TRUE(Search(plain, *fresh, off).ok());
  for (const std::string& id : plain.built) {
    EXPECT_EQ(fresh->GetCandidate(id)->params().count("SHAPE_K"), 0u) << fresh->GetCandidate(id)->name();
  }
}

// The specialise stage takes each problem's fastest general configuration of
// each tile, one per tile, and a tile already specialised there counts as done:
// a rerun specialises the next tiles, not the same tile's other variants.
TEST_F(SearchTest, SpecialisesOneConfigurationPerTileAndTheNextTilesOnARerun) {
  seeds_ = {SpecialisableTestFamily()};
  SearchOptions o;
  o.generations = 0;         // only the specialise stage makes specialised configurations
  o.leader_margin = 100;     // every tile is a leader
  o.specialise_per_problem = 2;
  // The tiles specialised on each problem by a worker's run.
  const auto specialised = [&](const FakeGpuWorkerForTest& w, Store& store) {
    std::map<std::string, std::vector<std::string>> out;
    for (const auto& [key, n] : w.measured) {
      absl::StatusOr<v1::Candidate> c = store.GetCandidate(std::get<0>(key));
      if (!c.ok() || !c->params().count("SHAPE_M")) continue;
      out[std::get<1>(key)].push_back(absl::StrCat(c->params().at("BM"), "x", c->params().at("BN")));
    }
    return out;
  };
  std::unique_ptr<Store> store = Open();
  FakeGpuWorkerForTest first(SpecialisableTestFamily());
  ASSERT_TRUE(Search(first, *store, o).ok());
  const auto run1 = specialised(first, *store);
  ASSERT_EQ(run1.size(), problems_.size());
  FakeGpuWorkerForTest second(SpecialisableTestFamily());
  ASSERT_TRUE(Search(second, *store, o).ok());
  const auto run2 = specialised(second, *store);
  for (const auto& [shape, tiles] : run1) {
    EXPECT_EQ(tiles.size(), 2u) << shape;
    EXPECT_EQ(std::set<std::string>(tiles.begin(), tiles.end()).size(), tiles.size())
        << shape << ": one tile specialised twice";
    auto again = run2.find(shape);
    if (again == run2.end()) continue;
    for (const std::string& t : again->second) {
      // The verify stage may re-check a specialised winner; anything else is a new tile.
      if (std::find(tiles.begin(), tiles.end(), t) != tiles.end()) continue;
      EXPECT_EQ(std::count(again->second.begin(), again->second.end(), t), 1) << shape << " " << t;
    }
  }
  size_t new_tiles = 0;
  for (const auto& [shape, tiles] : run2) {
    for (const std::string& t : tiles) new_tiles += std::find(run1.at(shape).begin(), run1.at(shape).end(), t) == run1.at(shape).end();
  }
  EXPECT_GT(new_tiles, 0u) << "the rerun specialised no new tile";
}

// Evolve moves around each problem's leader and, with evolve_runners_up, around
// the fastest configuration of another tile within leader_margin: every move
// measured is a neighbour of one of the two, and some only of the runner-up's.
TEST_F(SearchTest, EvolveAlsoMovesAroundTheFastestConfigurationOfAnotherTile) {
  SearchOptions before;
  before.generations = 0;
  before.specialise_per_problem = 0;
  std::unique_ptr<Store> store = Open();
  FakeGpuWorkerForTest first(TiledTestFamily());
  ASSERT_TRUE(Search(first, *store, before).ok());

  // The leaders of each problem now, as the search ranks them (device time).
  const SeedFamily family = TiledTestFamily();
  std::map<std::string, std::pair<KnobParams, KnobParams>> leaders;  // shape -> (leader, runner-up)
  for (const ShapeSpec& s : problems_) {
    absl::StatusOr<std::vector<StoredMeasurement>> h =
        store->SearchHistory(MakeProblem(first.gpu, "sm_90a", s.shape, s.layout));
    ASSERT_TRUE(h.ok());
    std::vector<std::tuple<double, std::string, KnobParams>> passed;  // ties by id, as the search
    for (const StoredMeasurement& m : *h) {
      if (m.measurement.verdict() != v1::VERDICT_PASSED) continue;
      absl::StatusOr<v1::Candidate> c = store->GetCandidate(m.measurement.candidate_id());
      ASSERT_TRUE(c.ok());
      passed.emplace_back(m.measurement.timings().device().median_us(), c->id(),
                          KnobParams(c->params().begin(), c->params().end()));
    }
    std::sort(passed.begin(), passed.end());
    ASSERT_FALSE(passed.empty());
    const KnobParams& lead = std::get<2>(passed[0]);
    for (const auto& [us, id, params] : passed) {
      if (params.at("BM") != lead.at("BM") || params.at("BN") != lead.at("BN")) {
        leaders[ShapeName(s.shape)] = {lead, params};
        break;
      }
    }
  }
  ASSERT_FALSE(leaders.empty());

  SearchOptions evolve = before;
  evolve.screen_per_problem = 0;  // the rerun measures evolve's moves only
  evolve.widen_per_problem = 0;
  evolve.generations = 1;
  evolve.leader_margin = 100;
  evolve.evolve_runners_up = 1;
  FakeGpuWorkerForTest second(TiledTestFamily());
  ASSERT_TRUE(Search(second, *store, evolve).ok());
  int runner_up_only = 0;
  for (const auto& [key, n] : second.measured) {
    if (first.measured.count(key)) continue;  // the GPU-learning measurement, re-checks
    auto at = leaders.find(std::get<1>(key));
    if (at == leaders.end()) continue;
    absl::StatusOr<v1::Candidate> c = store->GetCandidate(std::get<0>(key));
    ASSERT_TRUE(c.ok());
    const KnobParams moved = WithDefaults(family, KnobParams(c->params().begin(), c->params().end()));
    const auto& layout = std::get<2>(key);  // a lambda captures no structured binding in clang 14
    const auto is_neighbour = [&](const KnobParams& of) {
      const std::vector<KnobParams> around = Neighbours(family, layout, of);
      return std::find(around.begin(), around.end(), moved) != around.end();
    };
    const bool of_leader = is_neighbour(at->second.first), of_runner_up = is_neighbour(at->second.second);
    EXPECT_TRUE(of_leader || of_runner_up) << std::get<1>(key) << " " << c->name();
    runner_up_only += of_runner_up && !of_leader;
  }
  EXPECT_GT(runner_up_only, 0) << "no move around a runner-up of another tile";
}

}  // namespace
}  // namespace anvil
