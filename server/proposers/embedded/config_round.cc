#include "server/proposers/embedded/config_round.h"

#include <algorithm>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "seeds/space.h"

namespace anvil {
namespace {

// The plan's configurations with problems that have not seen them, in the
// order that reaches every problem soonest (each problem's first measurement
// waits for the first configuration built for it): greedily, each next the
// one reaching the most problems no earlier one reaches, then the one
// reaching the most problems in all, then by candidate id (deterministic).
std::vector<Config*> Todo(const ConfigPlan& plan) {
  struct Entry {
    Config* config;
    std::vector<const ProblemState*> unseen;
  };
  std::vector<Entry> left;
  for (const auto& [c, ps] : plan) {
    Entry e{c, {}};
    for (ProblemState* p : ps) {
      if (!p->measured.count(c->candidate.id())) e.unseen.push_back(p);
    }
    if (!e.unseen.empty() && !c->failed) left.push_back(std::move(e));
  }
  std::vector<Config*> out;
  std::set<const ProblemState*> reached;
  while (!left.empty()) {
    auto key = [&](const Entry& e) {
      size_t fresh = 0;
      for (const ProblemState* p : e.unseen) fresh += !reached.count(p);
      return std::make_tuple(fresh, e.unseen.size());
    };
    auto best = left.begin();
    for (auto it = std::next(left.begin()); it != left.end(); ++it) {
      const auto a = key(*it), b = key(*best);
      if (a > b || (a == b && it->config->candidate.id() < best->config->candidate.id())) best = it;
    }
    reached.insert(best->unseen.begin(), best->unseen.end());
    out.push_back(best->config);
    left.erase(best);
  }
  return out;
}

// The configuration for those of `targets` that have not seen it, each
// once: a plan may name a problem twice (a seed suggestion that is the
// default; widen sending two problems' shared leader to a third), and one
// runner measuring a problem twice also tunes cuBLASLt for it twice and
// keeps the second tuning, however slower.
Proposal ProposalFor(SearchState& s, const Config& c, const std::vector<ProblemState*>& targets) {
  Proposal pr;
  pr.candidate = c.candidate;
  pr.stage = s.stage();
  pr.fidelity = s.options().fidelity;
  for (ProblemState* p : targets) {
    const int index = static_cast<int>(p - s.problems().data());
    if (!p->measured.count(c.candidate.id()) &&
        std::find(pr.problems.begin(), pr.problems.end(), index) == pr.problems.end()) {
      pr.problems.push_back(index);
    }
  }
  return pr;
}

}  // namespace

bool PlanToday(SearchState& s, const v1::Candidate& c, ProblemState& p, ConfigPlan& plan) {
  const SeedFamily* f = s.FamilyOf(c);
  if (f == nullptr || !f->searchable) return false;
  KnobParams params(c.params().begin(), c.params().end());
  if (IsSpecialised(*f, params)) {
    std::optional<KnobParams> again = Specialise(*f, params, p.spec.shape);
    if (!again) return false;
    params = *std::move(again);
  }
  if (!CheckConfig(*f, p.spec.layout, params).ok()) return false;
  std::vector<ProblemState*>& to = plan[s.Intern(*f, p.spec.layout, params)];
  if (std::find(to.begin(), to.end(), &p) != to.end()) return false;
  to.push_back(&p);
  return true;
}

std::vector<Proposal> ConfigRound::Start(SearchState& s, const ConfigPlan& plan, bool within_budget) {
  configs_.clear();
  within_budget_ = within_budget;
  measuring_ = false;
  const std::vector<Config*> todo = Todo(plan);
  if (todo.empty() || (within_budget && s.OverBudget())) return {};
  s.Progress(absl::StrFormat("[%s] %d configurations to build and measure", s.stage(), todo.size()));
  std::vector<Proposal> proposals = Propose(s, todo, plan);
  if (proposals.empty()) {
    Finish(s);
    return proposals;
  }
  measuring_ = true;
  sent_ = s.Now();
  return proposals;
}

std::vector<Proposal> ConfigRound::Propose(SearchState& s, const std::vector<Config*>& todo,
                                           const ConfigPlan& plan) {
  const double deadline = s.StageDeadline();
  std::vector<Proposal> proposals;
  for (Config* c : todo) {
    if (c->failed) continue;
    absl::StatusOr<std::optional<v1::Build>> before = s.history().LatestBuild(c->candidate.id());
    if (before.ok() && *before && (*before)->verdict() != v1::VERDICT_PASSED) {
      c->failed = true;
      continue;
    }
    Proposal pr = ProposalFor(s, *c, plan.at(c));
    if (pr.problems.empty()) continue;
    if (within_budget_) pr.measure_by = s.elapsed_at_start() + deadline;
    proposals.push_back(std::move(pr));
    configs_.push_back(c);
  }
  return proposals;
}

void ConfigRound::Take(SearchState& s, size_t i, const Observation& o) {
  if (s.problems().front().problem.gpu().empty() && s.device()) s.SetProblemKeys();
  Config& c = *configs_[i];
  SearchResult& r = s.result();
  if (o.build) {
    c.build = *o.build;
    ++r.candidates_built;
  }
  if (o.outcome == Outcome::kBuildFailed) {
    c.failed = true;
    ++r.build_failures;
    s.Progress(absl::StrCat("[", s.stage(), "] ", c.candidate.name(), " did not build: ",
                            v1::Verdict_Name(o.build->verdict()), " ", o.build->error().substr(0, 300)));
    return;
  }
  bool all_failed = !o.measurements.empty();
  for (size_t j = 0; j < o.measurements.size() && j < o.measured_on.size(); ++j) {
    ++r.measurements;
    s.Record(s.problems()[o.measured_on[j]], &c.candidate, o.measurements[j], /*fresh=*/true);
    all_failed &= o.measurements[j].verdict() != v1::VERDICT_PASSED;
  }
  if (all_failed) {
    s.Progress(absl::StrCat("[", s.stage(), "] ", c.candidate.name(), ": ",
                            v1::Verdict_Name(o.measurements[0].verdict()), " ", o.measurements[0].reason()));
  }
}

void ConfigRound::Finish(SearchState& s) {
  if (measuring_) s.result().measure_seconds += std::chrono::duration<double>(s.Now() - sent_).count();
  measuring_ = false;
  if (within_budget_) s.OverBudget();  // says so when the stage or the budget was cut
  s.Progress(s.StatusLine());
}

absl::StatusOr<std::vector<Proposal>> OneRoundStage::Plan(SearchState& s) {
  if (planned_) return std::vector<Proposal>();
  planned_ = true;
  s.set_stage(name_);
  absl::StatusOr<ConfigPlan> plan = MakePlan(s);
  if (!plan.ok()) return plan.status();
  return round_.Start(s, *plan, /*within_budget=*/true);
}

void OneRoundStage::Take(SearchState& s, size_t i, const Observation& answer) { round_.Take(s, i, answer); }

absl::Status OneRoundStage::EndRound(SearchState& s) {
  round_.Finish(s);
  return absl::OkStatus();
}

}  // namespace anvil
