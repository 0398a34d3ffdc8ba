#include "seeds/seeds.h"

#include <gtest/gtest.h>

#include "seeds/space.h"

namespace anvil {
namespace {

TEST(LoadSeeds, LoadsEveryFamilyWithKnobsAndSource) {
  absl::StatusOr<std::vector<SeedFamily>> seeds = LoadSeeds(ANVIL_SEEDS_DIR_FOR_TEST);
  ASSERT_TRUE(seeds.ok()) << seeds.status();
  ASSERT_FALSE(seeds->empty());
  for (const SeedFamily& f : *seeds) {
    EXPECT_FALSE(f.source.empty()) << f.name;
    EXPECT_FALSE(f.layouts.empty()) << f.name;
    EXPECT_NE(f.source.find("anvil_gemm"), std::string::npos) << f.name;
    for (const SeedKnob& k : f.knobs) {
      EXPECT_FALSE(k.default_value.empty()) << f.name << " " << k.name;
      EXPECT_FALSE(k.reason.empty()) << f.name << " " << k.name << " has no hardware reason";
      EXPECT_EQ(k.name.rfind("ANVIL_", 0), std::string::npos);
    }
  }
}

TEST(MakeSeedCandidate, AppliesDefaultsAndOverrides) {
  absl::StatusOr<std::vector<SeedFamily>> seeds = LoadSeeds(ANVIL_SEEDS_DIR_FOR_TEST);
  ASSERT_TRUE(seeds.ok() && !seeds->empty());
  const SeedFamily& f = seeds->front();
  v1::Candidate a = MakeSeedCandidate(f, v1::LAYOUT_NT);
  EXPECT_EQ(a.params_size(), static_cast<int>(f.knobs.size()));
  EXPECT_EQ(a.id().size(), 64u);
  EXPECT_EQ(a.proposer(), "seed");
  v1::Candidate b = MakeSeedCandidate(f, v1::LAYOUT_NN);
  EXPECT_NE(a.id(), b.id());
}

// The defaults and suggested configurations must satisfy the family's own
// rules, and each layout must have a search space.
TEST(LoadSeeds, DefaultsAndSuggestionsAreLegal) {
  absl::StatusOr<std::vector<SeedFamily>> seeds = LoadSeeds(ANVIL_SEEDS_DIR_FOR_TEST);
  ASSERT_TRUE(seeds.ok()) << seeds.status();
  for (const SeedFamily& f : *seeds) {
    for (v1::Layout l : f.layouts) {
      EXPECT_TRUE(CheckConfig(f, l, {}).ok()) << CheckConfig(f, l, {});
      for (const KnobParams& s : f.suggested) {
        // A suggestion may be for one layout only (e.g. an NT-only tile).
        absl::Status st = CheckConfig(f, l, s);
        if (!st.ok()) {
          EXPECT_NE(st.message().find("LAYOUT"), std::string::npos) << st;
        }
      }
      EXPECT_FALSE(LegalConfigs(f, l).empty()) << f.name;
    }
  }
}

TEST(LoadSeeds, MissingDirectoryIsAnError) {
  EXPECT_FALSE(LoadSeeds("/nonexistent-anvil-seeds").ok());
}

}  // namespace
}  // namespace anvil
