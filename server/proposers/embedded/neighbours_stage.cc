// The neighbours stage: a problem new to the store starts from what won on
// the stored problems nearest to it on the same GPU model, before anything
// generic. For each problem with no measurement from an earlier job, the
// neighbour_problems nearest stored problems of its layout, arch and dtype
// within neighbour_distance, and from each its neighbour_per_problem fastest
// distinct configurations of today's families: a general one as it is (its
// kernel reads M, N and K at run time), a specialised one rebuilt for the new
// problem (its shape knobs set to the new M, N and K).
//
// The distance is the cost model's between shapes (cost_model.h
// ShapeDistance: the sum of |log2| differences of M, N and K): what wins is decided by how the tiles
// fit each extent, how deep K runs (stages, split-K) and how many waves the
// output makes, and each of those moves about one step per doubling of an
// extent; the model refines its estimates with the same neighbours.
#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "absl/strings/str_format.h"
#include "seeds/space.h"
#include "server/proposers/embedded/config_round.h"
#include "server/proposers/embedded/stages.h"

namespace anvil {
namespace {

bool SameKind(const v1::Problem& a, const v1::Problem& b) {
  return a.gpu() == b.gpu() && a.arch() == b.arch() && a.layout() == b.layout() && a.dtype() == b.dtype();
}

// Whether the store holds a measurement of the problem from another job.
bool MeasuredBefore(SearchState& s, const ProblemState& p) {
  for (const StoredMeasurement& m : s.History(p)) {
    if (m.job_id != s.job_id()) return true;
  }
  return false;
}

class NeighboursStage : public OneRoundStage {
 public:
  NeighboursStage() : OneRoundStage("neighbours") {}

 protected:
  absl::StatusOr<ConfigPlan> MakePlan(SearchState& s) override {
    ConfigPlan plan;
    const SearchOptions& o = s.options();
    if (o.neighbour_problems <= 0 || o.neighbour_per_problem <= 0) return plan;
    absl::StatusOr<std::vector<v1::Problem>> stored = s.history().Problems(s.problems().front().problem.gpu());
    if (!stored.ok()) return stored.status();
    int fresh = 0, found = 0;
    std::set<std::string> from;
    for (ProblemState& p : s.problems()) {
      if (MeasuredBefore(s, p)) continue;
      ++fresh;
      std::vector<std::pair<double, const v1::Problem*>> near;
      for (const v1::Problem& q : *stored) {
        const double d = ShapeDistance(p.problem.shape(), q.shape());  // 0: the problem itself
        if (SameKind(p.problem, q) && d > 0 && d <= o.neighbour_distance) {
          near.emplace_back(d, &q);
        }
      }
      std::sort(near.begin(), near.end(), [](const auto& a, const auto& b) {
        return a.first != b.first ? a.first < b.first : ShapeName(a.second->shape()) < ShapeName(b.second->shape());
      });
      int used = 0;
      for (const auto& [d, q] : near) {
        if (used == o.neighbour_problems) break;
        absl::StatusOr<int> took = Take(s, p, *q, plan);
        if (!took.ok()) return took.status();
        if (*took == 0) continue;  // nothing of today's families passed there
        ++used;
        found += *took;
        from.insert(ShapeName(q->shape()));
      }
    }
    s.Progress(absl::StrFormat("[%s] %d configurations from %d stored problems for %d problems new to "
                               "the store (of %d)",
                               s.stage(), found, from.size(), fresh, s.problems().size()));
    return plan;
  }

 private:
  // The fastest distinct configurations of today's families on `q`, for `p`.
  static absl::StatusOr<int> Take(SearchState& s, ProblemState& p, const v1::Problem& q, ConfigPlan& plan) {
    const SearchOptions& o = s.options();
    absl::StatusOr<ExemplarSet> ex = s.history().Exemplars(q, o.figure, 4 * o.neighbour_per_problem);
    if (!ex.ok()) return ex.status();
    int taken = 0;
    for (const Exemplar& e : ex->fastest) {
      if (taken == o.neighbour_per_problem) break;
      taken += PlanToday(s, e.candidate, p, plan);
    }
    return taken;
  }
};

}  // namespace

std::unique_ptr<Stage> MakeNeighboursStage() { return std::make_unique<NeighboursStage>(); }

}  // namespace anvil
