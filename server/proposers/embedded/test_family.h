// A tiled seed family for the cost-model and search tests, described the way
// seed.json does: tile and split-K knobs, a late raster knob, one rule, one
// suggestion and the model terms. Its source is never compiled.
#ifndef ANVIL_SERVER_PROPOSERS_EMBEDDED_TEST_FAMILY_H_
#define ANVIL_SERVER_PROPOSERS_EMBEDDED_TEST_FAMILY_H_

#include "seeds/seeds.h"

namespace anvil {

inline SeedFamily TiledTestFamily() {
  SeedFamily f;
  f.name = "99_tiled";
  f.arch = "sm_90a";
  f.source = "// a tiled kernel (never compiled by the tests)\n";
  f.layouts = {v1::LAYOUT_NT, v1::LAYOUT_NN};
  f.knobs = {{"BM", "128", {"64", "128", "256"}, "rows", false},
             {"BN", "128", {"64", "128", "256"}, "cols", false},
             {"SPLIT_K", "1", {"1", "2", "4", "8", "16"}, "k splits", false},
             {"GROUP_M", "8", {"1", "8"}, "raster", true}};
  f.constraints.push_back({*Expr::Parse("ANVIL_BM * ANVIL_BN <= 32768"), "registers"});
  f.suggested = {{{"BM", "64"}, {"BN", "64"}}};
  f.model.emplace("tile_m", *Expr::Parse("ANVIL_BM"));
  f.model.emplace("tile_n", *Expr::Parse("ANVIL_BN"));
  f.model.emplace("tile_k", *Expr::Parse("64"));
  f.model.emplace("split_k", *Expr::Parse("ANVIL_SPLIT_K"));
  f.model.emplace("cta_rate_permille", *Expr::Parse("min(1000, ANVIL_BM * ANVIL_BN / 16)"));
  f.model_constants = {{"efficiency", 0.9}, {"fixed_us", 3.0}, {"step_ns", 40}};
  return f;
}

// The same family with seed.json's shape knobs (SHAPE_M/N/K: the problem fixed
// at compile time; 0 = any shape), which only the specialise stage sets.
inline SeedFamily SpecialisableTestFamily() {
  SeedFamily f = TiledTestFamily();
  for (const char* d : {"M", "N", "K"}) {
    SeedKnob k{std::string("SHAPE_") + d, "0", {}, "fixed dimension", false};
    k.searched = false;
    k.shape = d;
    f.knobs.push_back(k);
  }
  return f;
}

}  // namespace anvil

#endif  // ANVIL_SERVER_PROPOSERS_EMBEDDED_TEST_FAMILY_H_
