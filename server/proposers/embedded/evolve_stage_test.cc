// The evolve stage: generations of moves around each problem's leaders,
// until its patience runs out.
#include "server/proposers/embedded/search_test_fixture.h"

namespace anvil {
namespace {

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
