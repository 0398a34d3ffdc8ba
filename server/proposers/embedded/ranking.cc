#include "server/proposers/embedded/ranking.h"

#include <algorithm>
#include <limits>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "proto/figures.h"
#include "seeds/space.h"

namespace anvil {
namespace {

bool ByTimeThenId(const std::pair<double, Config*>& a, const std::pair<double, Config*>& b) {
  return a.first != b.first ? a.first < b.first : a.second->candidate.id() < b.second->candidate.id();
}

// (first-principles estimate, family, params) of the space's configurations
// whose workspace fits and whose waste is within max_waste of the tightest.
std::vector<std::tuple<double, const SeedFamily*, const KnobParams*>> WithinWaste(
    SearchState& s, const ProblemState& p, const std::vector<std::pair<const SeedFamily*, KnobParams>>& space) {
  std::vector<std::tuple<double, double, const SeedFamily*, const KnobParams*>> raw;
  double tightest = std::numeric_limits<double>::infinity();
  for (const auto& [f, params] : space) {
    absl::StatusOr<Estimate> e = Predict(*f, p.spec.layout, params, p.spec.shape, s.model().device());
    if (!e.ok() || e->partial_bytes > s.options().max_workspace_bytes) continue;
    tightest = std::min(tightest, e->waste);
    raw.emplace_back(e->us, e->waste, f, &params);
  }
  std::vector<std::tuple<double, const SeedFamily*, const KnobParams*>> kept;
  for (const auto& [us, waste, f, params] : raw) {
    if (waste <= tightest + s.options().max_waste) kept.emplace_back(us, f, params);
  }
  return kept;
}

}  // namespace

Ranked Rank(SearchState& s, const ProblemState& p,
            const std::vector<std::pair<const SeedFamily*, KnobParams>>& space, size_t keep, bool diverse) {
  std::vector<std::tuple<double, const SeedFamily*, const KnobParams*>> kept = WithinWaste(s, p, space);
  const size_t refine = std::min(kept.size(), std::max<size_t>(keep * 40, 200));
  std::partial_sort(kept.begin(), kept.begin() + refine, kept.end());
  Ranked ranked;
  for (size_t i = 0; i < refine; ++i) {
    const auto& [us, f, params] = kept[i];
    Config* c = s.Intern(*f, p.spec.layout, *params);
    if (c->failed || p.measured.count(c->candidate.id())) continue;
    absl::StatusOr<Estimate> e = s.model().Refined(*f, p.spec.layout, *params, p.spec.shape);
    ranked.emplace_back(e.ok() ? e->us : us, c);
  }
  std::sort(ranked.begin(), ranked.end(), ByTimeThenId);
  Ranked out;
  std::set<std::string> kinds;
  for (const auto& [us, c] : ranked) {
    if (out.size() == keep) break;
    if (diverse && !kinds.insert(WorkKind(*c)).second) continue;
    out.emplace_back(us, c);
  }
  return out;
}

Ranked Passed(SearchState& s, const ProblemState& p) {
  Ranked passed;
  for (const StoredMeasurement& m : s.History(p)) {
    const double us = RankingUs(m.measurement, s.options().figure);
    if (us <= 0) continue;  // failed, or without the figure (not capturable): no rank
    Config* c = s.ConfigOf(m.measurement.candidate_id());
    if (c == nullptr) continue;  // no family, or its source changed since
    passed.emplace_back(us, c);
  }
  std::sort(passed.begin(), passed.end(), ByTimeThenId);
  Ranked out;
  std::set<const Config*> seen;
  for (const auto& [us, c] : passed) {
    if (seen.insert(c).second) out.emplace_back(us, c);
  }
  return out;
}

std::vector<Config*> Leaders(SearchState& s, const ProblemState& p, size_t n) {
  std::vector<Config*> out;
  for (const auto& [us, c] : Passed(s, p)) {
    if (out.size() >= n) break;
    out.push_back(c);
  }
  return out;
}

std::string TileOf(const Config& c) {
  absl::StatusOr<RuleVars> v = KnobVars(*c.family, c.candidate.layout(), c.params);
  if (!v.ok()) return c.candidate.id();
  return absl::StrCat(c.family->name, ":", ModelTerm(*c.family, *v, "tile_m", 0), "x",
                      ModelTerm(*c.family, *v, "tile_n", 0));
}

std::string WorkKind(const Config& c) {
  absl::StatusOr<RuleVars> v = KnobVars(*c.family, c.candidate.layout(), c.params);
  if (!v.ok()) return c.candidate.id();
  return absl::StrCat(TileOf(c), "/", ModelTerm(*c.family, *v, "split_k", 1), "/",
                      ModelTerm(*c.family, *v, "variant", 0));
}

}  // namespace anvil
