// Idle work: what the embedded search measures while a round waits. A stage
// plans its next round only once every answer of this one is in (stage.h),
// and the next round's candidates then take nvcc seconds to build: without
// more work the GPU would wait. Meanwhile the search measures what needs no
// build: configurations built earlier in the job, on problems of their
// layout that have not seen them, the cost model's most promising first
// (the pairs the seeds stage left to the later stages' ranking, and leaders
// another problem's stages built). Their answers go into the state as any
// stage's do (SearchState::Record), so the rounds after rank with them.
// Thread-compatible (reads and interns into a SearchState).
#ifndef ANVIL_SERVER_PROPOSERS_EMBEDDED_IDLE_WORK_H_
#define ANVIL_SERVER_PROPOSERS_EMBEDDED_IDLE_WORK_H_

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "server/proposer.h"
#include "server/proposers/embedded/search_state.h"

namespace anvil {

// Whether the stage under way may be joined by idle work: one of the
// search's stages before verification (seeds after the probe, screen, widen,
// specialise, evolve), on keyed problems, with time left before its deadline.
bool IdleWorkAllowed(SearchState& s);

// Up to `items` (configuration, problem) pairs as proposals of one problem
// each, labelled stage "idle", the most promising first: for each problem
// its per_problem best-ranked built, shape-generic configurations it has not
// seen (nor has in `pending`, candidate id and problem index), ordered by
// their predicted time over the problem's best so far.
std::vector<Proposal> IdleWork(SearchState& s, size_t items, size_t per_problem,
                               const std::set<std::pair<std::string, int>>& pending);

}  // namespace anvil

#endif  // ANVIL_SERVER_PROPOSERS_EMBEDDED_IDLE_WORK_H_
