// The seed kernel families the search starts from: each seeds/NN_name/ folder
// holds kernel.cu and seed.json (knobs, legal values, constraints and their
// hardware reasons; the format is in seeds/SEED_JSON.md). This loads them and
// makes candidates from them.
// Thread-safe after loading (read-only).
#ifndef ANVIL_SEEDS_SEEDS_H_
#define ANVIL_SEEDS_SEEDS_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "anvil/v1/types.pb.h"
#include "seeds/rules.h"

namespace anvil {

struct SeedKnob {
  std::string name;             // without the ANVIL_ prefix, e.g. "BM"
  std::string default_value;
  std::vector<std::string> values;  // legal values (expanded from ranges)
  std::string reason;           // the hardware reason for the limits
  // "late": tuned only around leaders (the search's evolutionary step), not
  // enumerated in the first screen (e.g. raster order, register split).
  bool late = false;
  // "off": the search keeps the default (a switch for measuring by hand, e.g.
  // one that moves warm but not device time, which the reward cannot see).
  bool searched = true;
  // "M", "N" or "K" (seed.json "shape"): the knob fixes that dimension of the
  // problem at compile time (0, the default, leaves it free). Never enumerated;
  // the search's specialise stage sets it to one problem's dimension.
  std::string shape = "";
  // Display-name tag: a knob off its default shows as <label><value> ("s6"), or,
  // for a mode knob, as its value's name ("StreamK" -> "streamk"). seed.json
  // "label" (default: the knob name in lower case) and "names" {value: name}.
  std::string label = "";
  std::map<std::string, std::string> value_names = {};
};

struct SeedRule {
  Expr expr;                    // non-zero when the configuration is legal
  std::string reason;
};

struct SeedFamily {
  std::string name;             // folder name, e.g. "03_wgmma_tma"
  std::string description;
  std::string arch;             // "sm_90a" or "sm_90"
  bool searchable = true;       // false: a reference kernel the search never proposes
  std::vector<v1::Layout> layouts;
  std::vector<SeedKnob> knobs;
  std::vector<SeedRule> constraints;  // over ANVIL_<KNOB> and ANVIL_LAYOUT_NT/NN
  std::vector<std::map<std::string, std::string>> suggested;  // knob (no prefix) -> value
  // Cost-model terms (expressions over the same variables), e.g. tile_m,
  // tile_n, tile_k, split_k, ctas_per_sm; see server/proposers/embedded/cost_model.h.
  std::map<std::string, Expr> model;
  std::map<std::string, double> model_constants;  // e.g. efficiency, fixed_us
  std::string source;           // kernel.cu text
  // seed.json "name_pattern": the display name's fixed part, e.g.
  // "sm90_wgmma_{BM}x{BN}x{BK}{changed}_{layout}": {KNOB} is the knob's value,
  // {layout} "nt" or "nn", {changed} the tags of the other knobs that differ from
  // their defaults (appended at the end when absent). Empty: "<name>{changed}_{layout}".
  std::string name_pattern;
};

// ANVIL_SEEDS_DIR, else the bundle's share/anvil/seeds (<exe>/.. or <exe>/../..:
// bin/ or libexec/<kind>/), else the source tree's.
std::string DefaultSeedsDir(const std::string& executable_dir);

// Every family under `dir`, in folder order. A malformed seed.json fails
// the whole load with the file named.
absl::StatusOr<std::vector<SeedFamily>> LoadSeeds(const std::string& dir);

// The display name of `candidate`, a configuration of `family`: the family's
// name_pattern, the knobs off their defaults and the short id, e.g.
// "sm90_wgmma_128x128x64_s6_persistent_pingpong_nt_1a2b3c4d". REQUIRES: its id set.
std::string SeedDisplayName(const SeedFamily& family, const v1::Candidate& candidate);

// A candidate of `family` for `layout` with `params` over the defaults; its name
// is SeedDisplayName's.
v1::Candidate MakeSeedCandidate(const SeedFamily& family, v1::Layout layout,
                                const std::map<std::string, std::string>& params = {});

}  // namespace anvil

#endif  // ANVIL_SEEDS_SEEDS_H_
