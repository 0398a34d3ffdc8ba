#include "server/proposers/embedded/idle_work.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "absl/strings/match.h"
#include "seeds/space.h"
#include "server/proposers/embedded/ranking.h"

namespace anvil {

bool IdleWorkAllowed(SearchState& s) {
  const std::string& stage = s.stage();
  const bool searching = stage == "seeds" || stage == "screen" || stage == "widen" ||
                         stage == "specialise" || absl::StartsWith(stage, "evolve-");
  return searching && s.device().has_value() && !s.problems().front().problem.gpu().empty() &&
         s.Seconds() < s.StageDeadline();
}

std::vector<Proposal> IdleWork(SearchState& s, size_t items, size_t per_problem,
                               const std::set<std::pair<std::string, int>>& pending) {
  // (predicted time over the problem's best, candidate id, problem, config)
  std::vector<std::tuple<double, std::string, int, Config*>> pairs;
  std::map<v1::Layout, std::vector<Config*>> built;  // general configurations, by layout
  for (size_t i = 0; i < s.problems().size(); ++i) {
    const ProblemState& p = s.problems()[i];
    auto [it, fresh] = built.try_emplace(p.spec.layout);
    if (fresh) {
      for (Config* c : s.BuiltConfigs(p.spec.layout)) {
        if (!IsSpecialised(*c->family, c->params)) it->second.push_back(c);
      }
    }
    std::vector<std::pair<const SeedFamily*, KnobParams>> space;
    for (Config* c : it->second) {
      const std::string& id = c->candidate.id();
      if (c->failed || p.measured.count(id) || pending.count({id, static_cast<int>(i)}) ||
          !s.WorkspaceFits(*c, p)) {
        continue;
      }
      space.emplace_back(c->family, c->params);
    }
    if (space.empty()) continue;
    for (const auto& [us, c] : Rank(s, p, space, per_problem, /*diverse=*/false)) {
      if (!c->build || pending.count({c->candidate.id(), static_cast<int>(i)})) continue;
      const double against = p.best_us > 0 ? p.best_us : p.baseline_us > 0 ? p.baseline_us : us;
      pairs.emplace_back(against > 0 ? us / against : us, c->candidate.id(), static_cast<int>(i), c);
    }
  }
  std::sort(pairs.begin(), pairs.end(), [](const auto& a, const auto& b) {
    return std::tie(std::get<0>(a), std::get<1>(a), std::get<2>(a)) <
           std::tie(std::get<0>(b), std::get<1>(b), std::get<2>(b));
  });
  std::vector<Proposal> out;
  const double measure_by = s.elapsed_at_start() + s.StageDeadline();
  for (const auto& [score, id, problem, c] : pairs) {
    if (out.size() >= items) break;
    Proposal pr;
    pr.candidate = c->candidate;
    pr.stage = "idle";
    pr.fidelity = s.options().fidelity;
    pr.problems = {problem};
    pr.measure_by = measure_by;
    out.push_back(std::move(pr));
  }
  return out;
}

}  // namespace anvil
