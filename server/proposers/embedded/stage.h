// Stage: one step of the embedded search (search.h describes them; stages.h
// lists them in order), as a strategy over the shared SearchState. The
// EmbeddedProposer drives the current stage round by round:
//
//   Plan(state) -> a round of proposals   (none: the stage has ended, and the
//        |                                  next stage is asked)
//        v
//   the coordinator builds and measures them
//        v
//   Take(state, i, answer) for each proposal of the round, as answers arrive
//        v
//   EndRound(state) after the last, then Plan again
//
// A stage plans from what the state holds (every measurement so far), so a
// round is planned only once the one before it is wholly answered.
// Thread-compatible: called on the proposer's caller's thread.
#ifndef ANVIL_SERVER_PROPOSERS_EMBEDDED_STAGE_H_
#define ANVIL_SERVER_PROPOSERS_EMBEDDED_STAGE_H_

#include <vector>

#include "absl/status/statusor.h"
#include "server/proposer.h"
#include "server/proposers/embedded/search_state.h"

namespace anvil {

class Stage {
 public:
  virtual ~Stage() = default;
  // The stage's next round, planned from what `state` holds now; none when
  // the stage has ended (it is not asked again). A non-OK status ends the
  // search with it.
  virtual absl::StatusOr<std::vector<Proposal>> Plan(SearchState& state) = 0;
  // The answer to proposals[i] of the round Plan returned last (each i once,
  // in any order).
  virtual void Take(SearchState& state, size_t i, const Observation& answer) = 0;
  // Once every proposal of that round has been answered, before the next
  // Plan. A non-OK status ends the search with it.
  virtual absl::Status EndRound(SearchState& state) = 0;
};

}  // namespace anvil

#endif  // ANVIL_SERVER_PROPOSERS_EMBEDDED_STAGE_H_
