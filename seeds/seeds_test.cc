#include "seeds/seeds.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <optional>

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

// seed.json's rules for 03_wgmma_tma must admit what the kernel builds and
// refuse what its static_asserts refuse (the search never spends nvcc time on
// a configuration the rules admit but the kernel cannot build).
TEST(LoadSeeds, WgmmaRulesFollowTheKernelsLimits) {
  absl::StatusOr<std::vector<SeedFamily>> seeds = LoadSeeds(ANVIL_SEEDS_DIR_FOR_TEST);
  ASSERT_TRUE(seeds.ok()) << seeds.status();
  const SeedFamily* f = nullptr;
  for (const SeedFamily& s : *seeds)
    if (s.name == "03_wgmma_tma") f = &s;
  ASSERT_NE(f, nullptr);
  const auto legal = [&](v1::Layout l, const KnobParams& p) { return CheckConfig(*f, l, p).ok(); };
  const KnobParams pingpong = {{"BM", "128"}, {"BN", "128"}, {"CONSUMERS", "2"},
                               {"PERSISTENT", "1"}, {"SCHEDULE", "1"}, {"STAGES", "5"}};
  // TMA-store staging is unpadded: pingpong 128x128 fits 5 stages with EPILOGUE=2
  // (230,480 bytes), not with EPILOGUE=1's padded rows (234,576 > 232,448).
  KnobParams p = pingpong;
  p["EPILOGUE"] = "2";
  EXPECT_TRUE(legal(v1::LAYOUT_NT, p));
  p["EPILOGUE"] = "1";
  EXPECT_FALSE(legal(v1::LAYOUT_NT, p));
  // Multicast clusters run with the persistent loop, not with stream-K.
  p = pingpong;
  p["CLUSTER"] = "2";
  EXPECT_TRUE(legal(v1::LAYOUT_NN, p));
  KnobParams sk = {{"BM", "128"}, {"BN", "128"}, {"PERSISTENT", "2"}, {"CLUSTER", "2"}};
  EXPECT_FALSE(legal(v1::LAYOUT_NT, sk));
  // Up to 32 splits with reduce-kernel slabs; at most 16 in a cluster.
  KnobParams split = {{"BM", "64"}, {"BN", "64"}, {"CONSUMERS", "1"}, {"STAGES", "6"},
                      {"SPLIT_K", "32"}};
  EXPECT_TRUE(legal(v1::LAYOUT_NN, split));
  split["SPLIT_REDUCE"] = "1";
  EXPECT_FALSE(legal(v1::LAYOUT_NN, split));
  split["SPLIT_K"] = "16";
  EXPECT_TRUE(legal(v1::LAYOUT_NN, split));
  // Swapped operands: NT only (both K-major), with the direct epilogue.
  KnobParams swap = {{"BM", "64"}, {"BN", "16"}, {"CONSUMERS", "1"}, {"STAGES", "16"},
                     {"SPLIT_K", "2"}, {"SWAP_AB", "1"}, {"EPILOGUE", "0"}};
  EXPECT_TRUE(legal(v1::LAYOUT_NT, swap));
  EXPECT_FALSE(legal(v1::LAYOUT_NN, swap));
  swap["EPILOGUE"] = "1";
  EXPECT_FALSE(legal(v1::LAYOUT_NT, swap));
  // Column-split consumers: two cooperative ones, each all of a 64- or 128-row
  // tile (a 256-row tile would be 4 m64 tiles each: the search once built three).
  KnobParams cols = {{"BM", "64"}, {"BN", "144"}, {"CONSUMERS", "2"}, {"SPLIT_COLS", "1"},
                     {"STAGES", "8"}, {"CLUSTER", "2"}, {"EPILOGUE", "1"}};
  EXPECT_TRUE(legal(v1::LAYOUT_NT, cols));
  EXPECT_FALSE(legal(v1::LAYOUT_NN, cols));  // NN's half of B must start on a 64-wide box
  cols["EPILOGUE"] = "2";
  EXPECT_FALSE(legal(v1::LAYOUT_NT, cols));  // 72 columns are not whole TMA store boxes
  cols = {{"BM", "256"}, {"BN", "128"}, {"CONSUMERS", "2"}, {"SPLIT_COLS", "1"}, {"STAGES", "4"}};
  EXPECT_FALSE(legal(v1::LAYOUT_NN, cols));
  cols["BM"] = "128";
  EXPECT_TRUE(legal(v1::LAYOUT_NN, cols));
  cols["CONSUMERS"] = "1";
  EXPECT_FALSE(legal(v1::LAYOUT_NN, cols));
  // BK=128: a slot of two k-tiles counts twice the shared memory.
  KnobParams bk = {{"BM", "64"}, {"BN", "64"}, {"CONSUMERS", "1"}, {"STAGES", "8"}};
  EXPECT_TRUE(legal(v1::LAYOUT_NT, bk));
  bk["BK"] = "128";
  EXPECT_FALSE(legal(v1::LAYOUT_NT, bk));  // 8 x 32 KiB
  bk["STAGES"] = "6";
  EXPECT_TRUE(legal(v1::LAYOUT_NT, bk));
  // Two-dimensional clusters: at most 8 CTAs, on the tile-per-CTA grid only.
  KnobParams grid2d = {{"BM", "128"}, {"BN", "96"}, {"CLUSTER", "4"}, {"CLUSTER_N", "2"},
                       {"STAGES", "5"}, {"EPILOGUE", "1"}};
  EXPECT_TRUE(legal(v1::LAYOUT_NT, grid2d));
  grid2d["CLUSTER_N"] = "4";
  EXPECT_FALSE(legal(v1::LAYOUT_NT, grid2d));  // 16 CTAs
  grid2d["CLUSTER"] = "2";
  EXPECT_TRUE(legal(v1::LAYOUT_NT, grid2d));
  grid2d["PERSISTENT"] = "1";
  EXPECT_FALSE(legal(v1::LAYOUT_NT, grid2d));
}

// The Hopper and small-tile families take the problem's shape as constants when
// specialised; a general configuration's candidate does not mention the shape knobs.
TEST(MakeSeedCandidate, ShapeKnobsAppearOnlyWhenSpecialised) {
  absl::StatusOr<std::vector<SeedFamily>> seeds = LoadSeeds(ANVIL_SEEDS_DIR_FOR_TEST);
  ASSERT_TRUE(seeds.ok()) << seeds.status();
  v1::Shape shape;
  shape.set_m(12288);
  shape.set_n(8192);
  shape.set_k(512);
  int families = 0;
  for (const SeedFamily& f : *seeds) {
    if (!f.searchable) continue;
    const std::optional<KnobParams> s = Specialise(f, {}, shape);
    if (!s) continue;
    ++families;
    const v1::Candidate general = MakeSeedCandidate(f, v1::LAYOUT_NN);
    EXPECT_EQ(general.params().count("SHAPE_M"), 0u) << f.name;
    const v1::Candidate fixed = MakeSeedCandidate(f, v1::LAYOUT_NN, *s);
    EXPECT_EQ(fixed.params().at("SHAPE_M"), "12288") << f.name;
    EXPECT_EQ(fixed.params().at("SHAPE_N"), "8192") << f.name;
    EXPECT_EQ(fixed.params().at("SHAPE_K"), "512") << f.name;
    EXPECT_NE(fixed.id(), general.id());
    EXPECT_TRUE(CheckConfig(f, v1::LAYOUT_NN, *s).ok()) << CheckConfig(f, v1::LAYOUT_NN, *s);
    EXPECT_NE(f.source.find("ANVIL_SHAPE_K"), std::string::npos) << f.name;
  }
  EXPECT_EQ(families, 2);  // 02_mma_sync and 03_wgmma_tma
}

TEST(LoadSeeds, AShapeKnobWithValuesIsMalformed) {
  const std::string dir = ::testing::TempDir() + "/anvil_shape_knob_seeds";
  std::filesystem::create_directories(dir + "/01_bad");
  std::ofstream(dir + "/01_bad/kernel.cu") << "// anvil_gemm\n";
  std::ofstream(dir + "/01_bad/seed.json")
      << R"({"layouts": ["nt"], "file": "kernel.cu", "knobs": {"ANVIL_SHAPE_M":)"
      << R"( {"default": 0, "shape": "M", "values": [0, 64], "reason": "r"}}})";
  absl::StatusOr<std::vector<SeedFamily>> seeds = LoadSeeds(dir);
  ASSERT_FALSE(seeds.ok());
  EXPECT_NE(seeds.status().message().find("shape knob"), std::string::npos) << seeds.status();
  std::filesystem::remove_all(dir);
}

TEST(LoadSeeds, MissingDirectoryIsAnError) {
  EXPECT_FALSE(LoadSeeds("/nonexistent-anvil-seeds").ok());
}

}  // namespace
}  // namespace anvil
