#include "seeds/display_name.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "seeds/seeds.h"

namespace anvil {
namespace {

const SeedFamily& Family(const std::string& name) {
  static const std::vector<SeedFamily>* seeds = [] {
    absl::StatusOr<std::vector<SeedFamily>> s = LoadSeeds(ANVIL_SEEDS_DIR_FOR_TEST);
    EXPECT_TRUE(s.ok()) << s.status();
    return new std::vector<SeedFamily>(s.ok() ? std::move(*s) : std::vector<SeedFamily>{});
  }();
  for (const SeedFamily& f : *seeds)
    if (f.name == name) return f;
  ADD_FAILURE() << "no family " << name;
  static const SeedFamily none;
  return none;
}

std::string Id8(const v1::Candidate& c) { return c.id().substr(0, 8); }

TEST(SeedDisplayName, DefaultsShowOnlyTheFamilyTileAndLayout) {
  const v1::Candidate w = MakeSeedCandidate(Family("03_wgmma_tma"), v1::LAYOUT_NT);
  EXPECT_EQ(w.name(), "sm90_wgmma_128x256x64_nt_" + Id8(w));
  const v1::Candidate m = MakeSeedCandidate(Family("02_mma_sync"), v1::LAYOUT_NN);
  EXPECT_EQ(m.name(), "sm80_mma_128x128x32_nn_" + Id8(m));
  const v1::Candidate n = MakeSeedCandidate(Family("01_naive"), v1::LAYOUT_NT);
  EXPECT_EQ(n.name(), "sm90_naive_nt_" + Id8(n));
}

TEST(SeedDisplayName, KnobsOffTheirDefaultsShowByLabelOrModeName) {
  const v1::Candidate c = MakeSeedCandidate(
      Family("03_wgmma_tma"), v1::LAYOUT_NT,
      {{"BM", "128"}, {"BN", "128"}, {"STAGES", "6"}, {"PERSISTENT", "1"}, {"SCHEDULE", "1"},
       {"EPILOGUE", "2"}, {"CLUSTER", "2"}, {"CONSUMERS", "2"}});
  EXPECT_EQ(c.name(),
            "sm90_wgmma_128x128x64_cm2_tmastore_persistent_pingpong_s6_nt_" + Id8(c));
  const v1::Candidate sk = MakeSeedCandidate(Family("03_wgmma_tma"), v1::LAYOUT_NN,
                                             {{"PERSISTENT", "2"}, {"SPLIT_K", "1"}});
  EXPECT_EQ(sk.name(), "sm90_wgmma_128x256x64_streamk_nn_" + Id8(sk));
  const v1::Candidate n = MakeSeedCandidate(Family("01_naive"), v1::LAYOUT_NT, {{"BLOCK", "32"}});
  EXPECT_EQ(n.name(), "sm90_naive_b32_nt_" + Id8(n));
}

TEST(SeedDisplayName, ShapeSpecialisationShowsTheFixedDimensions) {
  const v1::Candidate c = MakeSeedCandidate(
      Family("02_mma_sync"), v1::LAYOUT_NT,
      {{"SHAPE_M", "12288"}, {"SHAPE_N", "8192"}, {"SHAPE_K", "512"}});
  EXPECT_EQ(c.name(), "sm80_mma_128x128x32_kfix512_mfix12288_nfix8192_nt_" + Id8(c));
}

// Two configurations of a family never share a name (the id aside): what
// differs between them is in the name.
TEST(SeedDisplayName, SuggestedConfigurationsCanBeToldApartWithoutTheirIds) {
  for (const char* family : {"01_naive", "02_mma_sync", "03_wgmma_tma"}) {
    const SeedFamily& f = Family(family);
    std::map<std::string, std::map<std::string, std::string>> by_name;
    for (const auto& s : f.suggested) {
      for (v1::Layout layout : f.layouts) {
        const v1::Candidate c = MakeSeedCandidate(f, layout, s);
        std::map<std::string, std::string> params(c.params().begin(), c.params().end());
        params["layout"] = std::to_string(layout);
        const std::string name = c.name().substr(0, c.name().size() - 9);
        auto [it, fresh] = by_name.emplace(name, params);
        EXPECT_TRUE(fresh || it->second == params) << family << ": " << name << " names two";
      }
    }
  }
}

TEST(CheckNamePattern, RefusesUnknownPlaceholdersAndUnpairedBraces) {
  SeedFamily f;
  f.name = "99_test";
  SeedKnob bm;
  bm.name = "BM";
  bm.default_value = "64";
  f.knobs.push_back(bm);
  f.name_pattern = "x_{BM}{changed}_{layout}";
  EXPECT_TRUE(CheckNamePattern(f).ok());
  f.name_pattern = "x_{BQ}_{layout}";
  EXPECT_FALSE(CheckNamePattern(f).ok());
  f.name_pattern = "x_{BM_{layout}";
  EXPECT_FALSE(CheckNamePattern(f).ok());
  f.name_pattern = "x_BM}";
  EXPECT_FALSE(CheckNamePattern(f).ok());
  f.name_pattern = "";
  EXPECT_TRUE(CheckNamePattern(f).ok());
}

}  // namespace
}  // namespace anvil
