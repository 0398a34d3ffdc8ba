// The carry and transfer stages: the store's fastest configurations of an
// earlier source or another GPU model, measured here before the seeds.
#include "server/proposers/embedded/search_test_fixture.h"

namespace anvil {
namespace {

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
    // 6 (seed configuration, problem) pairs, less the two that learn the GPU
    // (one of each layout).
    skipped |= l.find("[seeds] 4 (configuration, problem) pairs skipped") != std::string::npos;
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

}  // namespace
}  // namespace anvil
