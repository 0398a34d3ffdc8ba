// The neighbours stage: a problem new to the store starts from the winners
// of its nearest stored problems on the same GPU model, specialised ones
// rebuilt for it, before the seeds.
#include "server/proposers/embedded/search_test_fixture.h"

namespace anvil {
namespace {

bool Said(const std::vector<std::string>& lines, const std::string& text) {
  for (const std::string& l : lines) {
    if (l.find(text) != std::string::npos) return true;
  }
  return false;
}

TEST_F(SearchTest, ANewProblemStartsFromItsNeighboursWinnersRebuiltForIt) {
  seeds_ = {SpecialisableTestFamily()};
  std::unique_ptr<Store> store = Open();
  // The store knows two problems: a near one (K half the new one's) and a
  // far one (a single row).
  problems_ = {{MakeShape(4096, 4096, 2048), v1::LAYOUT_NT}, {MakeShape(1, 4096, 4096), v1::LAYOUT_NT}};
  FakeGpuWorkerForTest first(SpecialisableTestFamily());
  absl::StatusOr<SearchResult> earlier = Search(first, *store, SearchOptions());
  ASSERT_TRUE(earlier.ok()) << earlier.status();
  absl::StatusOr<std::optional<v1::Kernel>> near_best =
      store->BestKernel(earlier->problems[0].problem(), "graph-cold");
  ASSERT_TRUE(near_best.ok() && near_best->has_value());
  const v1::Candidate& winner = (*near_best)->candidate();
  ASSERT_EQ(winner.params().at("SHAPE_K"), "2048") << "the near problem's winner is specialised";

  // A new problem, and one the store has measured (no neighbours for it).
  problems_ = {{MakeShape(4096, 4096, 4096), v1::LAYOUT_NT}, {MakeShape(4096, 4096, 2048), v1::LAYOUT_NT}};
  FakeGpuWorkerForTest w(SpecialisableTestFamily());
  std::vector<std::string> lines;
  absl::StatusOr<SearchResult> r = Search(w, *store, SearchOptions(), &lines);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(Said(lines, "[neighbours] 3 configurations from 1 stored problems for 1 problems new to the store (of 2)"))
      << "the far problem (distance 11) is not a neighbour; the near one (distance 1) gives its 3 fastest";
  // The winner, rebuilt for the new problem, is in the first build after the probe's.
  KnobParams rebuilt(winner.params().begin(), winner.params().end());
  rebuilt["SHAPE_K"] = "4096";
  const v1::Candidate expected = MakeSeedCandidate(seeds_[0], v1::LAYOUT_NT, WithDefaults(seeds_[0], rebuilt));
  ASSERT_GE(w.batches.size(), 2u);
  EXPECT_NE(std::find(w.batches[1].begin(), w.batches[1].end(), expected.id()), w.batches[1].end());
  EXPECT_GE((w.measured[{expected.id(), "4096x4096x4096", v1::LAYOUT_NT}]), 1);

  // Without the stage, the first builds after the probe are the seeds'.
  path_ += ".off.db";
  std::filesystem::remove(path_);
  std::unique_ptr<Store> fresh = Open();
  problems_ = {{MakeShape(4096, 4096, 2048), v1::LAYOUT_NT}};
  FakeGpuWorkerForTest again(SpecialisableTestFamily());
  ASSERT_TRUE(Search(again, *fresh, SearchOptions()).ok());
  problems_ = {{MakeShape(4096, 4096, 4096), v1::LAYOUT_NT}};
  SearchOptions off;
  off.neighbour_problems = 0;
  FakeGpuWorkerForTest w2(SpecialisableTestFamily());
  std::vector<std::string> lines2;
  ASSERT_TRUE(Search(w2, *fresh, off, &lines2).ok());
  EXPECT_FALSE(Said(lines2, "[neighbours]"));
}

TEST_F(SearchTest, NeighboursAreOfTheSameLayoutAndGpuModel) {
  std::unique_ptr<Store> store = Open();
  problems_ = {{MakeShape(4096, 4096, 2048), v1::LAYOUT_NN}};
  FakeGpuWorkerForTest other_layout(TiledTestFamily());
  ASSERT_TRUE(Search(other_layout, *store, SearchOptions()).ok());
  problems_ = {{MakeShape(4096, 4096, 2048), v1::LAYOUT_NT}};
  FakeGpuWorkerForTest other_gpu(TiledTestFamily());
  other_gpu.gpu = "OTHER-GPU";
  ASSERT_TRUE(Search(other_gpu, *store, SearchOptions()).ok());

  problems_ = {{MakeShape(4096, 4096, 4096), v1::LAYOUT_NT}};
  FakeGpuWorkerForTest w(TiledTestFamily());
  std::vector<std::string> lines;
  ASSERT_TRUE(Search(w, *store, SearchOptions(), &lines).ok());
  EXPECT_TRUE(Said(lines, "[neighbours] 0 configurations from 0 stored problems for 1 problems new to the store"));
}

}  // namespace
}  // namespace anvil
