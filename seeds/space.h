// The configuration space of a seed family: every assignment of its knobs
// that satisfies seed.json's constraint rules for a layout. The embedded
// search enumerates it, and moves through it one knob step at a time.
#ifndef ANVIL_SEEDS_SPACE_H_
#define ANVIL_SEEDS_SPACE_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "seeds/seeds.h"

namespace anvil {

using KnobParams = std::map<std::string, std::string>;  // knob (no ANVIL_ prefix) -> value

// Every knob of `family` with `params` over the defaults.
KnobParams WithDefaults(const SeedFamily& family, const KnobParams& params);

// A configuration's identity across versions of its family's source:
// "family/layout/KNOB=value/..." with every knob (defaults filled in).
std::string ConfigKey(const SeedFamily& family, v1::Layout layout, const KnobParams& params);

// The rule variables: ANVIL_<KNOB> for every knob (defaults filled in) and
// ANVIL_LAYOUT_NT / ANVIL_LAYOUT_NN. InvalidArgument for a non-integer value.
absl::StatusOr<RuleVars> KnobVars(const SeedFamily& family, v1::Layout layout,
                                  const KnobParams& params);

// OK when every knob value is one of its legal values and every rule holds;
// otherwise InvalidArgument naming the value or the rule and its reason.
absl::Status CheckConfig(const SeedFamily& family, v1::Layout layout, const KnobParams& params);

// Every legal configuration, complete (all knobs), in knob-value order. Knobs
// marked "late" stay at their defaults unless `with_late`. Stops after `limit`.
std::vector<KnobParams> LegalConfigs(const SeedFamily& family, v1::Layout layout,
                                     bool with_late = false, size_t limit = 2'000'000);

// Legal configurations one step away: one knob moved to the next or previous
// legal value, or two knobs moved together (a tile grown in one dimension and
// shrunk in another keeps its resources).
std::vector<KnobParams> Neighbours(const SeedFamily& family, v1::Layout layout,
                                   const KnobParams& params);

// `params` built for one problem: every shape knob of the family (seed.json
// "shape": "M", "N" or "K") set to that dimension of `shape`, the others as
// given (defaults filled in). nullopt when the family has no shape knobs.
std::optional<KnobParams> Specialise(const SeedFamily& family, const KnobParams& params,
                                     const v1::Shape& shape);

// Whether `params` fixes a dimension (the configuration runs one problem only).
bool IsSpecialised(const SeedFamily& family, const KnobParams& params);

// Value of a cost-model term of the family (seed.json "model"), or `fallback`
// when the family does not define it or it cannot be evaluated.
int64_t ModelTerm(const SeedFamily& family, const RuleVars& vars, const std::string& term,
                  int64_t fallback);
double ModelConstant(const SeedFamily& family, const std::string& name, double fallback);

}  // namespace anvil

#endif  // ANVIL_SEEDS_SPACE_H_
