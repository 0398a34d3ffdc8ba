// The carry and transfer stages: each problem's fastest configurations of
// another source or another GPU model, as configurations of today's
// families, measured here first. Carry takes those measured on this GPU with
// an earlier source of their family (a problem's best is always built from
// its family's current source); transfer those measured on
// SearchOptions::transfer_from: a starting point, never a result (the GPU is
// part of the problem key).
#include <algorithm>
#include <string>

#include "absl/strings/str_format.h"
#include "seeds/space.h"
#include "server/proposers/embedded/config_round.h"
#include "server/proposers/embedded/stages.h"

namespace anvil {
namespace {

// The fastest measurements of the problem on the GPU model `gpu` (same
// problem otherwise), by the search's figure and then, for rows from before
// that figure existed, by device time.
absl::StatusOr<std::vector<Exemplar>> FastestThere(SearchState& s, const ProblemState& p,
                                                   const std::string& gpu) {
  v1::Problem there = p.problem;
  there.set_gpu(gpu);
  const SearchOptions& o = s.options();
  // Sources changed since: the same knobs may appear under several ids.
  absl::StatusOr<ExemplarSet> ex = s.history().Exemplars(there, o.figure, 4 * o.transfer_per_problem);
  if (!ex.ok()) return ex.status();
  std::vector<Exemplar> fastest = ex->fastest;
  if (o.figure != "device") {
    absl::StatusOr<ExemplarSet> dev = s.history().Exemplars(there, "device", 4 * o.transfer_per_problem);
    if (!dev.ok()) return dev.status();
    fastest.insert(fastest.end(), dev->fastest.begin(), dev->fastest.end());
  }
  return fastest;
}

// Each problem's fastest distinct configurations on `gpu`: one whose knobs
// or rules have changed since is skipped, a knob added since takes its
// default. Those already measured with today's source are not measured
// again (ConfigRound).
absl::StatusOr<ConfigPlan> TransferPlan(SearchState& s, const std::string& gpu) {
  ConfigPlan plan;
  int found = 0;
  for (ProblemState& p : s.problems()) {
    absl::StatusOr<std::vector<Exemplar>> fastest = FastestThere(s, p, gpu);
    if (!fastest.ok()) return fastest.status();
    int taken = 0;
    for (const Exemplar& e : *fastest) {
      if (taken == s.options().transfer_per_problem) break;
      taken += PlanToday(s, e.candidate, p, plan);  // the same problem: a specialised one as it was
    }
    found += taken;
  }
  s.Progress(absl::StrFormat("[%s] %d configurations from %s for %d problems%s", s.stage(), found, gpu,
                             s.problems().size(),
                             found == 0 ? " (none of them measured there, or none legal today)" : ""));
  return plan;
}

class CarryStage : public OneRoundStage {
 public:
  CarryStage() : OneRoundStage("carry") {}

 protected:
  absl::StatusOr<ConfigPlan> MakePlan(SearchState& s) override {
    return TransferPlan(s, s.problems().front().problem.gpu());
  }
};

class TransferStage : public OneRoundStage {
 public:
  TransferStage() : OneRoundStage("transfer") {}

 protected:
  absl::StatusOr<ConfigPlan> MakePlan(SearchState& s) override {
    const std::string& from = s.options().transfer_from;
    if (from.empty() || from == s.problems().front().problem.gpu()) return ConfigPlan();  // carry's
    return TransferPlan(s, from);
  }
};

}  // namespace

std::unique_ptr<Stage> MakeCarryStage() { return std::make_unique<CarryStage>(); }
std::unique_ptr<Stage> MakeTransferStage() { return std::make_unique<TransferStage>(); }

}  // namespace anvil
