// The seeds stage: every family's default and suggested configurations on
// the problems of their layouts, skipping what an earlier source passed and
// what the workspace cap would refuse, and only the most promising where the
// budget is short.
#include <filesystem>
#include <string>

#include "server/proposers/embedded/search_test_fixture.h"

namespace anvil {
namespace {

TEST_F(SearchTest, AConfigurationThatFailedUnderAnEarlierSourceIsMeasuredAgainAfterTheFix) {
  std::unique_ptr<Store> store = Open();
  FakeGpuWorkerForTest broken(TiledTestFamily());
  broken.refuses_bm64 = true;  // the suggested BM=64 BN=64 fails on every problem
  ASSERT_TRUE(Search(broken, *store, SearchOptions()).ok());

  seeds_[0].source += "// the fix\n";
  FakeGpuWorkerForTest fixed(TiledTestFamily());
  std::vector<std::string> lines;
  ASSERT_TRUE(Search(fixed, *store, SearchOptions(), &lines).ok());
  // Only the default configuration's pairs are skipped (less the two that
  // learn the GPU, one of each layout): a failure says nothing about today's
  // source.
  bool skipped = false;
  for (const std::string& l : lines)
    skipped |= l.find("[seeds] 1 (configuration, problem) pairs skipped") != std::string::npos;
  EXPECT_TRUE(skipped);
  const v1::Candidate suggested =
      MakeSeedCandidate(seeds_[0], v1::LAYOUT_NT, {{"BM", "64"}, {"BN", "64"}});
  int problems = 0;
  for (const auto& [key, n] : fixed.measured)
    problems += std::get<0>(key) == suggested.id() ? 1 : 0;
  EXPECT_EQ(problems, 2);  // the two NT problems, each once
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

// A budget too short to measure every seed configuration on every problem
// measures each problem's most promising by the cost model, and says so.
TEST_F(SearchTest, AShortBudgetMeasuresEachProblemsMostPromisingSeeds) {
  seeds_[0].suggested.push_back({{"BM", "64"}, {"BN", "128"}});
  seeds_[0].suggested.push_back({{"BM", "128"}, {"BN", "64"}});
  auto seeds_round = [&](double share, std::vector<std::string>* lines) {
    path_ += "s";
    std::filesystem::remove(path_);
    std::unique_ptr<Store> store = Open();
    FakeGpuWorkerForTest w(seeds_[0]);
    SearchOptions o;
    o.clock = [&w] { return w.Now(); };
    o.seeds_share = share;
    o.budget_seconds = 60;
    o.screens_per_minute = 3;  // 3 x share (x 1 minute) over 3 problems
    o.min_seeds_per_problem = 1;
    EXPECT_TRUE(Search(w, *store, o, lines).ok());
    int configurations = -1;
    for (const std::string& l : *lines) {
      if (l.rfind("[seeds] ", 0) == 0 && l.find("configurations to build and measure") != std::string::npos) {
        configurations = std::stoi(l.substr(8));
      }
    }
    return configurations;
  };
  std::vector<std::string> all, capped;
  const int every = seeds_round(0, &all);  // no cap
  const int one_each = seeds_round(1, &capped);
  EXPECT_GE(every, 4);                     // the default and three suggestions, per layout
  EXPECT_GE(one_each, 1);
  EXPECT_LE(one_each, 3);                  // one per problem at most
  bool said = false;
  for (const std::string& l : capped) said |= l.find("[seeds] 1 per problem at most in this budget") != std::string::npos;
  EXPECT_TRUE(said);
}

}  // namespace
}  // namespace anvil
