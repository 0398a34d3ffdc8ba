// Test doubles of the coordinator's interfaces (worker/candidate_evaluator.h,
// server/proposer.h), so the whole job loop runs in CI with no GPU:
//   FakeEvaluator     "builds" at once (a candidate with param BAD=1 fails to
//                     compile) and "measures" a candidate at the time in its
//                     US param (plus the shape's M/1000 us), one fake second of
//                     GPU and clock time per shape; counts every pair measured.
//                     A PerShapeEvaluator (tests/per_shape_evaluator.h).
//   ScriptedProposer  proposes a fixed list of candidates per problem, in the
//                     order given; in the final phase it re-checks each
//                     problem's fastest passed candidate (once, or as often
//                     as asked).
// Thread-compatible, like the interfaces' users expect (the evaluator's
// counters are read after the job ends).
#ifndef ANVIL_TESTS_COORDINATOR_FAKES_H_
#define ANVIL_TESTS_COORDINATOR_FAKES_H_

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "proto/candidate.h"
#include "proto/problem.h"
#include "reward/reward.h"
#include "worker/candidate_evaluator.h"
#include "server/proposer.h"
#include "tests/per_shape_evaluator.h"

namespace anvil::testing_fakes {

// A clock that moves only when told (the evaluator moves it by GPU time).
struct FakeClock {
  std::atomic<int64_t> ms{0};
  std::chrono::steady_clock::time_point Now() const {
    return std::chrono::steady_clock::time_point(std::chrono::milliseconds(ms.load()));
  }
};

inline v1::Candidate FakeCandidate(v1::Layout layout, double us, const std::string& tag, bool bad = false) {
  v1::Candidate c;
  c.set_source(absl::StrCat("// fake kernel ", tag, " ", us, "\n"));
  c.set_layout(layout);
  c.set_arch("sm_90a");
  (*c.mutable_params())["US"] = absl::StrCat(us);
  (*c.mutable_params())["BAD"] = bad ? "1" : "0";
  AssignCandidateId(c);
  c.set_name(absl::StrCat("fake_", tag, "_", c.id().substr(0, 8)));
  return c;
}

class FakeEvaluator : public testing::PerShapeEvaluator {
 public:
  explicit FakeEvaluator(FakeClock* clock) : clock_(clock) {}

  std::optional<v1::RunnerInfo> device() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return info_;
  }

  std::atomic<int> builds{0};
  int measured_total = 0;
  int fail_after = -1;               // Measure fails (Anvil's own failure) after this many
  double efficiency_per_us = 0;      // efficiency = this / us (target-efficiency tests)
  std::map<std::pair<std::string, std::string>, int> measured;  // (candidate, problem) -> times
  std::map<std::pair<std::string, std::string>, int> rechecked;

 protected:
  v1::Build BuildOne(const v1::Candidate& c) override {
    v1::Build b;
    b.set_arch(c.arch());
    const bool bad = c.params().at("BAD") == "1";
    b.set_verdict(bad ? v1::VERDICT_COMPILE_ERROR : v1::VERDICT_PASSED);
    if (bad) b.set_error("ptxas: too many resources requested");
    b.set_artifact("/nonexistent/candidate.so");
    ++builds;
    return b;
  }
  absl::Status Admit(const MeasureRequest&) override {
    if (fail_after >= 0 && measured_total >= fail_after) return absl::UnavailableError("the fake worker is gone");
    return absl::OkStatus();
  }
  v1::Measurement MeasureOne(const v1::Candidate& c, const v1::Shape& s) override {
    MeasureRequest r;
    r.candidate = c;
    return MeasureShape(r, s);
  }
  v1::Measurement MeasureShape(const MeasureRequest& r, const v1::Shape& s) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      info_ = v1::RunnerInfo();
      info_->set_gpu("FAKE-GPU");
      info_->set_arch("sm_90a");
      info_->set_sm_count(132);
    }
    const std::string key = ShapeName(s) + std::string(LayoutName(r.candidate.layout()));
    ++(r.recheck ? rechecked : measured)[{r.candidate.id(), key}];
    ++measured_total;
    const double us = std::stod(r.candidate.params().at("US")) + s.m() / 1000.0;
    v1::Measurement m;
    m.set_candidate_id(r.candidate.id());
    *m.mutable_problem() = MakeProblem("FAKE-GPU", "sm_90a", s, r.candidate.layout());
    m.set_verdict(v1::VERDICT_PASSED);
    v1::Timings* t = m.mutable_timings();
    for (v1::TimingStats* f : {t->mutable_device(), t->mutable_warm(), t->mutable_cold(),
                               t->mutable_call(), t->mutable_graph_hot(), t->mutable_graph_cold()}) {
      f->set_median_us(us);  // every figure alike, the graph regimes (the default) included
    }
    v1::Baseline* b = m.add_baselines();
    b->set_name("cublas");
    v1::Timings* bt = b->mutable_timings();
    for (v1::TimingStats* f : {bt->mutable_device(), bt->mutable_warm(), bt->mutable_cold(),
                               bt->mutable_call(), bt->mutable_graph_hot(), bt->mutable_graph_cold()}) {
      f->set_median_us(10 + s.m() / 1000.0);
    }
    if (efficiency_per_us > 0) m.set_efficiency(efficiency_per_us / us);
    if (clock_) clock_->ms += 1000;
    return m;
  }

  FakeClock* clock_;
  mutable std::mutex mu_;
  std::optional<v1::RunnerInfo> info_;
};

// Proposes, for each problem, the candidates `script` gives it (by problem
// index), one proposal per (candidate, problem), in the order: every
// problem's list in problem order (so a naive scheduler serves the first
// problems first). Final phase: one re-check per problem of its fastest.
class ScriptedProposer : public Proposer {
 public:
  // rechecks: re-checks of each problem's fastest in the final phase.
  ScriptedProposer(std::string name, std::vector<std::vector<v1::Candidate>> script, int rechecks = 1)
      : name_(std::move(name)), script_(std::move(script)), rechecks_(rechecks) {}

  const std::string& name() const override { return name_; }

  absl::StatusOr<std::vector<Proposal>> Propose(const SearchView& view, int n) override {
    ++propose_calls;
    std::vector<Proposal> out;
    if (view.final_phase) return Rechecks(view);
    while (static_cast<int>(out.size()) < n && next_problem_ < script_.size()) {
      std::vector<v1::Candidate>& list = script_[next_problem_];
      if (next_ < list.size()) {
        Proposal p;
        p.candidate = list[next_++];
        p.problems = {static_cast<int>(next_problem_)};
        p.stage = "scripted";
        p.fidelity = fidelity;
        out.push_back(std::move(p));
      } else {
        ++next_problem_;
        next_ = 0;
      }
    }
    return out;
  }

  void Observe(const SearchView& view, std::span<const Observation> results) override {
    for (const Observation& o : results) {
      observed.push_back(o);
      for (size_t j = 0; j < o.measurements.size(); ++j) {
        const int p = o.measured_on[j];
        const double us = FigureUs(o.measurements[j].timings(), view.figure);
        auto it = best_.find(p);
        if (o.measurements[j].verdict() == v1::VERDICT_PASSED && (it == best_.end() || us < it->second.first)) {
          best_[p] = {us, o.proposal.candidate};
        }
      }
    }
  }

  int propose_calls = 0;
  std::vector<Observation> observed;
  v1::Fidelity fidelity = v1::FIDELITY_FULL;  // of its proposals (re-checks are full)

 private:
  std::vector<Proposal> Rechecks(const SearchView&) {
    std::vector<Proposal> out;
    for (const auto& [p, best] : best_) {
      if (!rechecked_.insert(p).second) continue;
      for (int i = 0; i < rechecks_; ++i) {
        Proposal r;
        r.candidate = best.second;
        r.problems = {p};
        r.recheck = true;
        r.stage = "verify";
        out.push_back(std::move(r));
      }
    }
    return out;
  }

  std::string name_;
  std::vector<std::vector<v1::Candidate>> script_;
  const int rechecks_;
  size_t next_problem_ = 0, next_ = 0;
  std::map<int, std::pair<double, v1::Candidate>> best_;
  std::set<int> rechecked_;
};

}  // namespace anvil::testing_fakes

#endif  // ANVIL_TESTS_COORDINATOR_FAKES_H_
