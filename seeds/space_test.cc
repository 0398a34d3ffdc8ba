#include "seeds/space.h"

#include <gtest/gtest.h>

#include <optional>
#include <set>

#include "absl/strings/str_cat.h"

namespace anvil {
namespace {

// A family with a few knobs and rules, standing in for seed.json.
SeedFamily TestFamily() {
  SeedFamily f;
  f.name = "test_family";
  f.layouts = {v1::LAYOUT_NT, v1::LAYOUT_NN};
  f.knobs = {{"BM", "64", {"32", "64", "128"}, "rows", false},
             {"BN", "64", {"32", "64", "128"}, "cols", false},
             {"STAGES", "2", {"2", "3", "4"}, "ring", false},
             {"GROUP_M", "8", {"1", "8"}, "raster", true}};
  for (const char* r : {"ANVIL_BM * ANVIL_BN <= 8192",
                        "ANVIL_LAYOUT_NT == 1 || ANVIL_BN >= 64",
                        "ANVIL_STAGES * (ANVIL_BM + ANVIL_BN) <= 512"}) {
    f.constraints.push_back({*Expr::Parse(r), "test rule"});
  }
  f.model.emplace("tile_m", *Expr::Parse("ANVIL_BM"));
  f.model_constants["efficiency"] = 0.5;
  return f;
}

// Brute force over the product, for comparison.
std::set<KnobParams> BruteForce(const SeedFamily& f, v1::Layout layout, bool with_late) {
  std::set<KnobParams> out;
  for (const auto& bm : f.knobs[0].values)
    for (const auto& bn : f.knobs[1].values)
      for (const auto& st : f.knobs[2].values)
        for (const auto& g : with_late ? f.knobs[3].values : std::vector<std::string>{"8"}) {
          KnobParams p{{"BM", bm}, {"BN", bn}, {"STAGES", st}, {"GROUP_M", g}};
          if (CheckConfig(f, layout, p).ok()) out.insert(p);
        }
  return out;
}

TEST(LegalConfigs, MatchesBruteForceForBothLayouts) {
  SeedFamily f = TestFamily();
  for (v1::Layout l : {v1::LAYOUT_NT, v1::LAYOUT_NN}) {
    for (bool late : {false, true}) {
      std::vector<KnobParams> got = LegalConfigs(f, l, late);
      std::set<KnobParams> want = BruteForce(f, l, late);
      EXPECT_EQ(std::set<KnobParams>(got.begin(), got.end()), want);
      EXPECT_EQ(got.size(), want.size());  // no duplicates
      EXPECT_FALSE(want.empty());
    }
  }
  EXPECT_LT(LegalConfigs(f, v1::LAYOUT_NN).size(), LegalConfigs(f, v1::LAYOUT_NT).size());
  EXPECT_EQ(LegalConfigs(f, v1::LAYOUT_NT, true, 3).size(), 3u);
}

TEST(CheckConfig, NamesTheBrokenRuleOrValue) {
  SeedFamily f = TestFamily();
  EXPECT_TRUE(CheckConfig(f, v1::LAYOUT_NT, {{"BM", "128"}, {"BN", "32"}}).ok());
  absl::Status s = CheckConfig(f, v1::LAYOUT_NN, {{"BN", "32"}});
  EXPECT_NE(s.message().find("ANVIL_LAYOUT_NT == 1"), std::string::npos) << s;
  EXPECT_NE(CheckConfig(f, v1::LAYOUT_NT, {{"BM", "48"}}).message().find("legal values"),
            std::string::npos);
  EXPECT_FALSE(CheckConfig(f, v1::LAYOUT_NT, {{"NOPE", "1"}}).ok());
}

TEST(Neighbours, AreLegalAndOneOrTwoStepsAway) {
  SeedFamily f = TestFamily();
  KnobParams start = WithDefaults(f, {});
  std::vector<KnobParams> n = Neighbours(f, v1::LAYOUT_NT, start);
  ASSERT_FALSE(n.empty());
  bool moved_late = false;
  for (const KnobParams& p : n) {
    EXPECT_TRUE(CheckConfig(f, v1::LAYOUT_NT, p).ok());
    int changed = 0;
    for (const auto& [k, v] : p) changed += v != start.at(k);
    EXPECT_GE(changed, 1);
    EXPECT_LE(changed, 2);
    moved_late |= p.at("GROUP_M") != "8";
  }
  EXPECT_TRUE(moved_late);  // late knobs are tuned around leaders
}

TEST(SearchOff, KnobKeepsItsDefaultButStaysSettable) {
  SeedFamily f = TestFamily();
  SeedKnob pdl{"PDL", "1", {"0", "1"}, "switch", false};
  pdl.searched = false;
  f.knobs.push_back(pdl);
  for (bool late : {false, true}) {
    for (const KnobParams& p : LegalConfigs(f, v1::LAYOUT_NT, late)) EXPECT_EQ(p.at("PDL"), "1");
  }
  const KnobParams start = WithDefaults(f, {});
  const std::vector<KnobParams> n = Neighbours(f, v1::LAYOUT_NT, start);
  ASSERT_FALSE(n.empty());
  for (const KnobParams& p : n) EXPECT_EQ(p.at("PDL"), "1");
  EXPECT_TRUE(CheckConfig(f, v1::LAYOUT_NT, {{"PDL", "0"}}).ok());  // by hand: eval --param
}

// Shape knobs: never enumerated or moved, set only by Specialise, 0 or a dimension.
TEST(ShapeKnobs, AreSetOnlyBySpecialise) {
  SeedFamily f = TestFamily();
  EXPECT_FALSE(Specialise(f, {}, v1::Shape()).has_value());  // no shape knobs: nothing to fix
  for (const char* d : {"M", "N", "K"}) {
    SeedKnob k{absl::StrCat("SHAPE_", d), "0", {}, "fixed dimension", false};
    k.searched = false;
    k.shape = d;
    f.knobs.push_back(k);
  }
  for (const KnobParams& p : LegalConfigs(f, v1::LAYOUT_NT, true)) EXPECT_FALSE(IsSpecialised(f, p));
  const KnobParams start = WithDefaults(f, {{"BM", "32"}});
  for (const KnobParams& p : Neighbours(f, v1::LAYOUT_NT, start)) EXPECT_FALSE(IsSpecialised(f, p));

  v1::Shape shape;
  shape.set_m(1000);
  shape.set_n(77);
  shape.set_k(1234);
  const std::optional<KnobParams> s = Specialise(f, {{"BM", "32"}}, shape);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->at("SHAPE_M"), "1000");
  EXPECT_EQ(s->at("SHAPE_N"), "77");
  EXPECT_EQ(s->at("SHAPE_K"), "1234");
  EXPECT_EQ(s->at("BM"), "32");
  EXPECT_EQ(s->at("BN"), "64");  // defaults filled in
  EXPECT_TRUE(IsSpecialised(f, *s));
  EXPECT_TRUE(CheckConfig(f, v1::LAYOUT_NT, *s).ok()) << CheckConfig(f, v1::LAYOUT_NT, *s);
  EXPECT_NE(ConfigKey(f, v1::LAYOUT_NT, *s), ConfigKey(f, v1::LAYOUT_NT, start));
  // Neighbours of a specialised configuration stay specialised to the same problem.
  const std::vector<KnobParams> around = Neighbours(f, v1::LAYOUT_NT, *s);
  ASSERT_FALSE(around.empty());
  for (const KnobParams& p : around) EXPECT_EQ(p.at("SHAPE_K"), "1234");

  EXPECT_FALSE(CheckConfig(f, v1::LAYOUT_NT, {{"SHAPE_M", "-1"}}).ok());
  EXPECT_FALSE(CheckConfig(f, v1::LAYOUT_NT, {{"SHAPE_M", "big"}}).ok());
  EXPECT_FALSE(CheckConfig(f, v1::LAYOUT_NT, {{"SHAPE_M", "4294967296"}}).ok());
}

TEST(ConfigKey, NamesTheSameKnobsAlikeWithDefaultsFilledIn) {
  SeedFamily f = TestFamily();
  EXPECT_EQ(ConfigKey(f, v1::LAYOUT_NT, {}), ConfigKey(f, v1::LAYOUT_NT, {{"BM", "64"}}));
  EXPECT_NE(ConfigKey(f, v1::LAYOUT_NT, {}), ConfigKey(f, v1::LAYOUT_NN, {}));
  EXPECT_NE(ConfigKey(f, v1::LAYOUT_NT, {}), ConfigKey(f, v1::LAYOUT_NT, {{"BM", "128"}}));
}

TEST(ModelTerm, EvaluatesOrFallsBack) {
  SeedFamily f = TestFamily();
  absl::StatusOr<RuleVars> vars = KnobVars(f, v1::LAYOUT_NT, {{"BM", "128"}});
  ASSERT_TRUE(vars.ok());
  EXPECT_EQ(ModelTerm(f, *vars, "tile_m", 1), 128);
  EXPECT_EQ(ModelTerm(f, *vars, "split_k", 1), 1);
  EXPECT_EQ(ModelConstant(f, "efficiency", 1.0), 0.5);
  EXPECT_FALSE(KnobVars(f, v1::LAYOUT_NT, {{"BM", "big"}}).ok());
}

}  // namespace
}  // namespace anvil
