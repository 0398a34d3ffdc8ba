#include "server/proposers/embedded/embedded_proposer.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_format.h"

#include "proto/figures.h"
#include "server/proposers/embedded/idle_work.h"
#include "server/proposers/embedded/search_state.h"
#include "server/proposers/embedded/stages.h"

namespace anvil {

EmbeddedProposer::EmbeddedProposer(EmbeddedProposerOptions options) : options_(std::move(options)) {}

EmbeddedProposer::~EmbeddedProposer() {
  if (state_ != nullptr && !ended_ && options_.on_done) {
    options_.on_done(absl::CancelledError("the job stopped"));
  }
}

const std::string& EmbeddedProposer::name() const {
  static const std::string kName = "embedded";
  return kName;
}

absl::StatusOr<std::vector<Proposal>> EmbeddedProposer::Propose(const SearchView& view, int n) {
  note_ = view.note;
  if (state_ == nullptr && !ended_) {
    if (absl::Status st = Start(view); !st.ok()) End(st);
  } else if (!ended_) {
    state_->See(view);
  }
  if (ended_) {
    if (!status_.ok()) return status_;
    return std::vector<Proposal>();
  }
  const bool fresh = handed_ == 0 && !round_.empty();
  const bool waiting = handed_ >= round_.size() && unanswered_ > 0;
  std::vector<Proposal> out;
  // Measure what needs no build (idle_work.h), one batch of it at a time:
  // while a round's answers are pending, and ahead of a new round's first
  // proposals, however many they are, while its builds are under way (the
  // rest of the round comes with the next calls).
  if ((fresh || waiting) && n > 0 && idle_.empty() &&
      options_.search.idle_items > 0 && IdleWorkAllowed(*state_)) {
    std::set<std::pair<std::string, int>> pending;
    for (size_t i = 0; i < round_.size(); ++i) {
      if (answered_[i]) continue;
      for (int p : round_[i].problems) pending.insert({round_[i].candidate.id(), p});
    }
    idle_ = IdleWork(*state_, std::min<size_t>(static_cast<size_t>(n), options_.search.idle_items), 2, pending);
    if (!idle_.empty()) {
      state_->Progress(absl::StrFormat("[idle] %d built configurations on problems that have not "
                                       "seen them, while the %s round %s",
                                       idle_.size(), state_->stage(), fresh ? "builds" : "is answered"));
    }
    out = idle_;
  }
  while (handed_ < round_.size() && static_cast<int>(out.size()) < n) out.push_back(round_[handed_++]);
  return out;
}

bool EmbeddedProposer::TakeIdle(const Observation& o) {
  auto it = std::find_if(idle_.begin(), idle_.end(), [&](const Proposal& p) {
    return p.candidate.id() == o.proposal.candidate.id() && p.problems == o.proposal.problems &&
           !o.proposal.recheck;
  });
  if (it == idle_.end()) return false;
  idle_.erase(it);
  Config* c = state_->ConfigOf(o.proposal.candidate.id());
  for (size_t j = 0; j < o.measurements.size() && j < o.measured_on.size(); ++j) {
    ++state_->result().measurements;
    state_->Record(state_->problems()[o.measured_on[j]], c ? &c->candidate : nullptr, o.measurements[j],
                   /*fresh=*/true);
  }
  return true;
}

void EmbeddedProposer::Observe(const SearchView& view, std::span<const Observation> results) {
  if (state_ == nullptr || ended_) return;
  note_ = view.note;
  state_->See(view);
  for (const Observation& o : results) {
    const int i = Match(o);
    if (i < 0) {
      TakeIdle(o);  // idle work's, else of no proposal pending
      continue;
    }
    answered_[i] = true;
    --unanswered_;
    stages_[stage_]->Take(*state_, static_cast<size_t>(i), o);
  }
  if (round_.empty() || unanswered_ > 0) return;
  if (absl::Status st = stages_[stage_]->EndRound(*state_); !st.ok()) {
    End(st);
    return;
  }
  Advance();
}

absl::Status EmbeddedProposer::Start(const SearchView& view) {
  std::vector<ShapeSpec> problems;
  for (const ProblemView& p : view.problems) problems.push_back(p.spec);
  SearchOptions o = options_.search;
  if (view.budget_seconds > 0) o.budget_seconds = std::min(o.budget_seconds, view.budget_seconds);
  o.figure = view.figure;
  if (problems.empty()) return absl::InvalidArgumentError("no problems to search");
  if (!IsFigure(o.figure)) {
    return absl::InvalidArgumentError("the search's figure must be device, warm, cold or call");
  }
  if (options_.seeds.empty()) return absl::FailedPreconditionError("no seed families loaded");
  // The stages' lines go to the job's watchers (the view's note, as log
  // events) and to options_.progress; their new-best lines only to the
  // latter, since the job reports every new best itself.
  ProgressFn progress = [this](const std::string& line) {
    if (options_.progress) options_.progress(line);
    if (note_) note_(line);
  };
  state_ = std::make_unique<SearchState>(options_.seeds, problems, view.job_id, o, std::move(progress),
                                         view.elapsed_seconds);
  state_->set_new_best_lines(options_.progress ? options_.progress : [](const std::string&) {});
  state_->See(view);
  stages_ = MakeStages(o);
  Advance();
  return absl::OkStatus();
}

void EmbeddedProposer::Advance() {
  round_.clear();
  handed_ = 0;
  while (stage_ < stages_.size()) {
    absl::StatusOr<std::vector<Proposal>> round = stages_[stage_]->Plan(*state_);
    if (!round.ok()) {
      End(round.status());
      return;
    }
    if (!round->empty()) {
      round_ = *std::move(round);
      answered_.assign(round_.size(), false);
      unanswered_ = round_.size();
      return;
    }
    ++stage_;
  }
  End(state_->Finish());
}

void EmbeddedProposer::End(const absl::StatusOr<SearchResult>& result) {
  ended_ = true;
  status_ = result.status();
  round_.clear();
  if (options_.on_done) options_.on_done(result);
}

int EmbeddedProposer::Match(const Observation& o) const {
  for (size_t i = 0; i < round_.size(); ++i) {
    const Proposal& p = round_[i];
    if (!answered_[i] && p.candidate.id() == o.proposal.candidate.id() && p.problems == o.proposal.problems &&
        p.recheck == o.proposal.recheck) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

}  // namespace anvil
