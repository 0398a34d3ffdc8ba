// How the stages order configurations: by the cost model before they are
// measured (Rank), by their measurements after (Passed, Leaders), and what
// counts as the same tile or the same kind of work. Ties go by candidate id,
// so a search's course does not depend on where its configurations were
// allocated. Thread-compatible (they read and intern into a SearchState).
#ifndef ANVIL_SERVER_PROPOSERS_EMBEDDED_RANKING_H_
#define ANVIL_SERVER_PROPOSERS_EMBEDDED_RANKING_H_

#include <string>
#include <utility>
#include <vector>

#include "server/proposers/embedded/search_state.h"

namespace anvil {

// (time, configuration), fastest first.
using Ranked = std::vector<std::pair<double, Config*>>;

// Ranks configurations of `space` for a problem: unmeasured, waste within
// bounds, cheapest by the first-principles model, then the best of those
// re-ranked by the refined model; at most `keep`. With `diverse`, at most one
// configuration per kind of work (WorkKind), so a screen spends its
// measurements on different shapes of work, not on variants the
// first-principles model cannot tell apart.
Ranked Rank(SearchState& s, const ProblemState& p,
            const std::vector<std::pair<const SeedFamily*, KnobParams>>& space, size_t keep, bool diverse);

// The problem's correct candidates of today's sources, fastest first by the
// search's figure (RankingUs), each once, with its fastest figure.
Ranked Passed(SearchState& s, const ProblemState& p);
// The first n of Passed.
std::vector<Config*> Leaders(SearchState& s, const ProblemState& p, size_t n);

// A configuration's tile: its family and the CTA tile's rows and columns.
std::string TileOf(const Config& c);
// Its kind of work: the tile, the K split and the variant (e.g. persistent).
std::string WorkKind(const Config& c);

}  // namespace anvil

#endif  // ANVIL_SERVER_PROPOSERS_EMBEDDED_RANKING_H_
