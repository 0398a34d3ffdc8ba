// The probe: the GPU is part of every problem key, so the search first
// measures one seed configuration on one problem of its layout (a real,
// stored measurement) to learn it, then reads back what the store holds on
// the problems. The probe takes one pair of each layout the job has: they
// build side by side, and once the GPU is known each layout has a built
// configuration, which the seeds round measures on the layout's other
// problems at once, while its own builds run (a problem's first measurement
// waits for no further nvcc run).
#include <map>
#include <utility>

#include "absl/strings/str_format.h"
#include "server/proposers/embedded/config_round.h"
#include "server/proposers/embedded/stages.h"

namespace anvil {
namespace {

class ProbeStage : public Stage {
 public:
  absl::StatusOr<std::vector<Proposal>> Plan(SearchState& s) override {
    if (ended_) return std::vector<Proposal>();
    if (!begun_) {
      begun_ = true;
      s.set_stage("seeds");  // the probe is the seeds stage's first measurement
      Pairs(s);
    } else if (s.device()) {
      return Learnt(s);  // from the round just answered
    }
    // Per layout, each (seed configuration, problem of its layout) in turn
    // until one has run: a configuration that fails to build is not tried
    // again.
    ConfigPlan plan;
    for (auto& [layout, pairs] : pairs_) {
      size_t& next = next_[layout];
      while (next < pairs.size() && pairs[next].first->failed) ++next;
      if (next < pairs.size()) {
        plan[pairs[next].first].push_back(pairs[next].second);
        ++next;
      }
    }
    if (plan.empty()) {
      return absl::UnavailableError("no seed configuration could be built and run on this GPU");
    }
    std::vector<Proposal> round = round_.Start(s, plan, /*within_budget=*/false);
    if (!round.empty()) return round;
    if (s.device()) return Learnt(s);
    return Plan(s);  // nothing new in these pairs: the next ones
  }

  void Take(SearchState& s, size_t i, const Observation& answer) override { round_.Take(s, i, answer); }

  absl::Status EndRound(SearchState& s) override {
    round_.Finish(s);
    return absl::OkStatus();
  }

 private:
  void Pairs(SearchState& s) {
    for (Config* c : s.SeedConfigs()) {
      for (ProblemState& p : s.problems()) {
        if (p.spec.layout == c->candidate.layout()) pairs_[p.spec.layout].emplace_back(c, &p);
      }
    }
  }

  absl::StatusOr<std::vector<Proposal>> Learnt(SearchState& s) {
    ended_ = true;
    if (absl::Status st = s.LoadHistory(); !st.ok()) return st;
    s.Progress(absl::StrFormat("resumed from the store: %d measurements on these problems, "
                               "%d model observations",
                               s.resumed(), s.model().observations()));
    return std::vector<Proposal>();
  }

  std::map<v1::Layout, std::vector<std::pair<Config*, ProblemState*>>> pairs_;
  std::map<v1::Layout, size_t> next_;
  bool begun_ = false;
  bool ended_ = false;
  ConfigRound round_;
};

}  // namespace

std::unique_ptr<Stage> MakeProbeStage() { return std::make_unique<ProbeStage>(); }

}  // namespace anvil
