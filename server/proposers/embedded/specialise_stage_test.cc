// The specialise stage: each problem's general leaders rebuilt with its
// shape as constants, one per tile.
#include "server/proposers/embedded/search_test_fixture.h"

namespace anvil {
namespace {

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

}  // namespace
}  // namespace anvil
