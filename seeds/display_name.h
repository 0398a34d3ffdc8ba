// Display names of seed candidates (seed.json "name_pattern", knob "label" and
// "names"): what a configuration is, in a few tokens, for logs, tables and the
// store. SeedDisplayName itself is declared in seeds/seeds.h. Pure functions;
// thread-safe.
#ifndef ANVIL_SEEDS_DISPLAY_NAME_H_
#define ANVIL_SEEDS_DISPLAY_NAME_H_

#include "absl/status/status.h"
#include "seeds/seeds.h"

namespace anvil {

// OK when every {placeholder} of family.name_pattern is a knob (no ANVIL_
// prefix), "layout" or "changed", and the braces pair up.
absl::Status CheckNamePattern(const SeedFamily& family);

}  // namespace anvil

#endif  // ANVIL_SEEDS_DISPLAY_NAME_H_
