// EmbeddedProposer: the default proposer, needing no network: the staged
// search over the seed families' knobs (search.h: carry, transfer, seeds,
// screen, widen, specialise, evolve, verify) behind the Proposer interface.
// The stages run on a thread of the proposer's own, started by the first
// Propose: each round they plan is handed out by Propose and answered by
// Observe, and the stages wait for a round's answers before planning the
// next (they plan from what was measured). Re-checks of the winners (the
// verify stage) come as Proposal::recheck.
// Thread-safety: as Proposer (one caller); the stages' thread is internal.
#ifndef ANVIL_SERVER_PROPOSERS_EMBEDDED_EMBEDDED_PROPOSER_H_
#define ANVIL_SERVER_PROPOSERS_EMBEDDED_EMBEDDED_PROPOSER_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "seeds/seeds.h"
#include "server/proposer.h"
#include "server/proposers/embedded/search.h"

namespace anvil {

struct EmbeddedProposerOptions {
  std::vector<SeedFamily> seeds;  // REQUIRES: non-empty
  SearchOptions search;           // its budget_seconds: capped by the job's wall budget left
  ProgressFn progress;            // the stages' lines for a person; may be empty
  // Called on the stages' thread when they end, with what they found.
  std::function<void(const absl::StatusOr<SearchResult>&)> on_done;
};

class EmbeddedProposer : public Proposer {
 public:
  explicit EmbeddedProposer(EmbeddedProposerOptions options);
  ~EmbeddedProposer() override;  // cancels the stages if they still run, and waits

  const std::string& name() const override;
  absl::StatusOr<std::vector<Proposal>> Propose(const SearchView& view, int n) override;
  void Observe(const SearchView& view, std::span<const Observation> results) override;

 private:
  class Channel;
  void Start(const SearchView& view);

  EmbeddedProposerOptions options_;
  std::unique_ptr<Channel> channel_;
  std::thread thread_;
};

}  // namespace anvil

#endif  // ANVIL_SERVER_PROPOSERS_EMBEDDED_EMBEDDED_PROPOSER_H_
