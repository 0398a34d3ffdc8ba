// EmbeddedProposer: the default proposer, needing no network: the staged
// search over the seed families' knobs (search.h: probe, carry, transfer, neighbours,
// seeds, screen, widen, specialise, evolve, verify) behind the Proposer
// interface, as a state machine on the caller's thread:
//
//   first Propose --> plan the first stage's first round
//   Propose --------> hand out the current round (up to n at a time); with
//                     a new round's first proposals and while a round's
//                     answers are pending, idle work: built configurations
//                     on problems that have not seen them (idle_work.h), one
//                     batch at a time
//   Observe --------> each answer to the stage (Stage::Take); the round's
//                     last answer ends it (Stage::EndRound) and plans the
//                     next round: the stage's next, else the next stage's
//   no stage left --> on_done(result); Propose returns none from then on
//
// The stages plan each round from every measurement before it. Re-checks of
// the winners (the verify stage) come as Proposal::recheck. A stage's error
// (a store read failed, no seed runs on this GPU) ends the search: on_done
// gets it and every later Propose returns it.
// Thread-safety: as Proposer (one caller, one call at a time).
#ifndef ANVIL_SERVER_PROPOSERS_EMBEDDED_EMBEDDED_PROPOSER_H_
#define ANVIL_SERVER_PROPOSERS_EMBEDDED_EMBEDDED_PROPOSER_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "seeds/seeds.h"
#include "server/proposer.h"
#include "server/proposers/embedded/search_options.h"

namespace anvil {

class SearchState;
class Stage;

struct EmbeddedProposerOptions {
  std::vector<SeedFamily> seeds;  // REQUIRES: non-empty
  SearchOptions search;           // its budget_seconds: capped by the job's wall budget left
  // Every line of the stages for a person (tests, benches); may be
  // empty. In a job the lines also go to its watchers (SearchView::note),
  // but for the new-best lines: the job reports those itself.
  ProgressFn progress;
  // Called once, on the caller's thread, when the stages end (in the Propose
  // or Observe that ends them), with what they found or why they failed; or
  // by the destructor, Cancelled, when the proposer goes away mid-search.
  std::function<void(const absl::StatusOr<SearchResult>&)> on_done;
};

class EmbeddedProposer : public Proposer {
 public:
  explicit EmbeddedProposer(EmbeddedProposerOptions options);
  ~EmbeddedProposer() override;  // mid-search: on_done(Cancelled)

  const std::string& name() const override;
  absl::StatusOr<std::vector<Proposal>> Propose(const SearchView& view, int n) override;
  void Observe(const SearchView& view, std::span<const Observation> results) override;

 private:
  absl::Status Start(const SearchView& view);
  // Plans the next round: the current stage's next, else the next stage's
  // first; ends the search when no stage has one left.
  void Advance();
  void End(const absl::StatusOr<SearchResult>& result);
  // The unanswered proposal of the round that `o` answers, or -1.
  int Match(const Observation& o) const;
  // Takes `o` into the state when it answers idle work (false: it does not).
  bool TakeIdle(const Observation& o);

  EmbeddedProposerOptions options_;
  std::unique_ptr<SearchState> state_;  // from the first Propose
  std::vector<std::unique_ptr<Stage>> stages_;
  size_t stage_ = 0;                    // the current stage's index
  std::vector<Proposal> round_;         // the current stage's current round
  std::vector<bool> answered_;          // [i]: round_[i] has been observed
  size_t handed_ = 0;                   // round_[0, handed_) handed out
  size_t unanswered_ = 0;
  std::vector<Proposal> idle_;          // idle work handed out, unanswered (idle_work.h)
  bool ended_ = false;
  std::function<void(const std::string&)> note_;  // the current call's SearchView::note
  absl::Status status_;                 // once ended: how
};

}  // namespace anvil

#endif  // ANVIL_SERVER_PROPOSERS_EMBEDDED_EMBEDDED_PROPOSER_H_
