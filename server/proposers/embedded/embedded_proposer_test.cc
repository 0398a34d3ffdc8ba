// The EmbeddedProposer as a state machine, driven by hand the way the
// coordinator drives it (Propose, build and measure, Observe) on a store that
// holds nothing: rounds are handed out whole and only once the one before is
// answered, on_done comes once on the caller's thread, errors stick, and
// the proposer can go away mid-search.
#include "server/proposers/embedded/embedded_proposer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "proto/problem.h"
#include "server/proposers/embedded/test_family.h"

namespace anvil {
namespace {

// Test double of the store's history, as the view gives it: it holds nothing.
class EmptyHistoryForTest : public HistoryReader {
 public:
  absl::StatusOr<std::vector<StoredMeasurement>> SearchHistory(const v1::Problem&,
                                                               const std::optional<std::string>&) override {
    return std::vector<StoredMeasurement>();
  }
  absl::StatusOr<ExemplarSet> Exemplars(const v1::Problem&, const std::string&, int) override {
    return ExemplarSet();
  }
  absl::StatusOr<v1::Candidate> GetCandidate(const std::string& id) override { return absl::NotFoundError(id); }
  absl::StatusOr<std::optional<v1::Build>> LatestBuild(const std::string&) override {
    return std::optional<v1::Build>();
  }
};

class EmbeddedProposerTest : public ::testing::Test {
 protected:
  EmbeddedProposerTest() {
    view_.job_id = "job-1";
    view_.figure = "graph-cold";
    ProblemView p;
    p.spec = {MakeShape(4096, 4096, 4096), v1::LAYOUT_NT};
    p.name = "4096x4096x4096 nt";
    view_.problems = {p};
    view_.history = &history_;
  }

  std::unique_ptr<EmbeddedProposer> Make(SearchOptions search = {}) {
    EmbeddedProposerOptions o;
    o.search = search;
    o.seeds = {TiledTestFamily()};
    o.progress = [this](const std::string& line) { lines_.push_back(line); };
    o.on_done = [this](const absl::StatusOr<SearchResult>& r) {
      done_.push_back(r);
      done_on_ = std::this_thread::get_id();
    };
    return std::make_unique<EmbeddedProposer>(std::move(o));
  }

  std::vector<Proposal> Propose(EmbeddedProposer& e, int n = 1000) {
    absl::StatusOr<std::vector<Proposal>> got = e.Propose(view_, n);
    EXPECT_TRUE(got.ok()) << got.status();
    return got.ok() ? *got : std::vector<Proposal>();
  }

  // The answer of a GPU that builds everything and measures each candidate
  // at a time of its own on each problem (the runner's device known from then on).
  Observation Measured(const Proposal& p) {
    view_.device.emplace();
    view_.device->set_gpu("FAKE-GPU");
    view_.device->set_arch("sm_90a");
    view_.device->set_sm_count(132);
    Observation o;
    o.proposal = p;
    o.outcome = Outcome::kMeasured;
    o.build.emplace();
    o.build->set_candidate_id(p.candidate.id());
    o.build->set_verdict(v1::VERDICT_PASSED);
    o.measured_on = p.problems;
    const double us = 10.0 + static_cast<double>(std::hash<std::string>()(p.candidate.id()) % 100) / 10;
    for (int i : p.problems) {
      v1::Measurement m;
      m.set_candidate_id(p.candidate.id());
      *m.mutable_problem() = MakeProblem("FAKE-GPU", "sm_90a", view_.problems[i].spec.shape,
                                         view_.problems[i].spec.layout);
      m.set_verdict(v1::VERDICT_PASSED);
      m.set_verified(p.recheck);
      m.mutable_timings()->mutable_graph_cold()->set_median_us(us);
      m.mutable_timings()->mutable_device()->set_median_us(us);
      v1::Baseline* b = m.add_baselines();
      b->set_name("cublas");
      b->mutable_timings()->mutable_graph_cold()->set_median_us(20);
      o.measurements.push_back(m);
    }
    return o;
  }

  // The answer to a proposal whose build failed.
  static Observation BuildFailed(const Proposal& p) {
    Observation o;
    o.proposal = p;
    o.outcome = Outcome::kBuildFailed;
    o.build.emplace();
    o.build->set_verdict(v1::VERDICT_COMPILE_ERROR);
    return o;
  }

  void Answer(EmbeddedProposer& e, const std::vector<Proposal>& round) {
    std::vector<Observation> answers;
    for (const Proposal& p : round) answers.push_back(Measured(p));
    e.Observe(view_, answers);
  }

  // Answers round after round until the proposer has nothing more; the
  // stage of each round.
  std::vector<std::string> RunToTheEnd(EmbeddedProposer& e) {
    std::vector<std::string> stages;
    for (int round = 0; round < 100; ++round) {
      const std::vector<Proposal> got = Propose(e);
      if (got.empty()) break;
      stages.push_back(got[0].stage);
      Answer(e, got);
    }
    return stages;
  }

  // A second problem, the probe and the seeds round, whose first
  // configuration is answered on the first problem only (the second's
  // measurement skipped, as when its budget ran out): built, and unmeasured
  // on the second problem. The seeds round.
  std::vector<Proposal> SeedsWithABuiltPairLeft(EmbeddedProposer& e) {
    ProblemView second = view_.problems[0];
    second.spec = {MakeShape(2048, 4096, 1024), v1::LAYOUT_NT};
    second.name = "2048x4096x1024 nt";
    view_.problems.push_back(second);
    Answer(e, Propose(e));  // the probe, on the first problem
    const std::vector<Proposal> seeds = Propose(e);
    EXPECT_EQ(seeds.size(), 2u);
    if (seeds.empty()) return seeds;
    EXPECT_EQ(seeds[0].problems, (std::vector<int>{0, 1}));
    Observation partial = Measured(seeds[0]);
    partial.measured_on = {0};
    partial.measurements.resize(1);
    const std::vector<Observation> answers = {partial};
    e.Observe(view_, answers);
    return seeds;
  }

  bool Said(const std::string& text) const {
    for (const std::string& l : lines_) {
      if (absl::StrContains(l, text)) return true;
    }
    return false;
  }

  SearchView view_;
  EmptyHistoryForTest history_;
  std::vector<std::string> lines_;
  std::vector<absl::StatusOr<SearchResult>> done_;
  std::thread::id done_on_;
};

TEST_F(EmbeddedProposerTest, ProposesNothingMoreWhileARoundIsPending) {
  std::unique_ptr<EmbeddedProposer> e = Make();
  // The probe: one seed configuration on the problem, to learn the GPU.
  const std::vector<Proposal> probe = Propose(*e);
  ASSERT_EQ(probe.size(), 1u);
  EXPECT_EQ(probe[0].stage, "seeds");
  EXPECT_EQ(probe[0].problems, std::vector<int>{0});
  EXPECT_TRUE(Propose(*e).empty());
  EXPECT_TRUE(Propose(*e).empty());
  EXPECT_TRUE(done_.empty()) << "none while pending is not the end";
  Answer(*e, probe);
  EXPECT_TRUE(Said("resumed from the store: 0 measurements"));
  EXPECT_FALSE(Propose(*e).empty());
}

TEST_F(EmbeddedProposerTest, HandsARoundOutInPiecesOfAtMostN) {
  std::unique_ptr<EmbeddedProposer> e = Make();
  Answer(*e, Propose(*e));
  // The seeds stage: the default and the suggested configuration.
  std::vector<Proposal> round;
  for (std::vector<Proposal> got = Propose(*e, 1); !got.empty(); got = Propose(*e, 1)) {
    ASSERT_EQ(got.size(), 1u);
    round.push_back(got[0]);
  }
  ASSERT_EQ(round.size(), 2u);
  EXPECT_NE(round[0].candidate.id(), round[1].candidate.id());
  for (const Proposal& p : round) EXPECT_EQ(p.stage, "seeds");
}

TEST_F(EmbeddedProposerTest, PlansTheNextStageOnlyOnceTheRoundIsWhollyObserved) {
  std::unique_ptr<EmbeddedProposer> e = Make();
  Answer(*e, Propose(*e));
  const std::vector<Proposal> seeds = Propose(*e);
  ASSERT_EQ(seeds.size(), 2u);
  Answer(*e, {seeds[1]});  // answers come in any order
  EXPECT_TRUE(Propose(*e).empty());
  EXPECT_FALSE(Said("[screen]")) << "the screen was planned before the seeds were measured";
  Answer(*e, {seeds[0]});
  const std::vector<Proposal> screen = Propose(*e);
  ASSERT_FALSE(screen.empty());
  for (const Proposal& p : screen) {
    EXPECT_EQ(p.stage, "screen");
    EXPECT_NE(p.candidate.id(), seeds[0].candidate.id());  // measured already
    EXPECT_NE(p.candidate.id(), seeds[1].candidate.id());
  }
}

// While a round's answers are pending, the GPU need not wait: a built
// configuration is measured on a problem that has not seen it (idle work),
// one batch at a time, and its answer counts as any stage's.
TEST_F(EmbeddedProposerTest, MeasuresBuiltConfigurationsWhileARoundIsPending) {
  std::unique_ptr<EmbeddedProposer> e = Make();
  const std::vector<Proposal> seeds = SeedsWithABuiltPairLeft(*e);
  ASSERT_EQ(seeds.size(), 2u);
  const std::vector<Proposal> idle = Propose(*e);
  ASSERT_EQ(idle.size(), 1u);
  EXPECT_EQ(idle[0].stage, "idle");
  EXPECT_EQ(idle[0].candidate.id(), seeds[0].candidate.id());
  EXPECT_EQ(idle[0].problems, std::vector<int>{1});
  EXPECT_GT(idle[0].measure_by, 0);
  EXPECT_TRUE(Said("[idle] 1 built configurations"));
  EXPECT_TRUE(Propose(*e).empty()) << "one batch of idle work at a time";
  Answer(*e, idle);
  EXPECT_TRUE(Propose(*e).empty()) << "nothing built is left unmeasured";
  Answer(*e, {seeds[1]});
  const std::vector<Proposal> screen = Propose(*e);
  ASSERT_FALSE(screen.empty());
  for (const Proposal& p : screen) {
    EXPECT_EQ(p.stage, "screen");
    EXPECT_NE(p.candidate.id(), seeds[0].candidate.id()) << "idle work's answer was not taken";
  }
}

// A new round's first proposals come with idle work ahead of them: what is
// built is measured while the round builds.
TEST_F(EmbeddedProposerTest, ANewRoundComesWithIdleWorkAheadOfIt) {
  SearchOptions search;
  search.screen_per_problem = 1;  // a screen round that leaves built pairs unproposed
  std::unique_ptr<EmbeddedProposer> e = Make(search);
  const std::vector<Proposal> seeds = SeedsWithABuiltPairLeft(*e);
  ASSERT_EQ(seeds.size(), 2u);
  const std::vector<Proposal> idle = Propose(*e);
  ASSERT_EQ(idle.size(), 1u);
  Observation skipped;  // the idle work skipped: the pair is still unmeasured
  skipped.proposal = idle[0];
  skipped.reason = "the job's budget is spent";
  const std::vector<Observation> none = {skipped};
  e->Observe(view_, none);
  Answer(*e, {seeds[1]});  // the seeds round ends; the screen round is new
  const std::vector<Proposal> next = Propose(*e);
  ASSERT_FALSE(next.empty());
  ASSERT_GE(next.size(), 2u);
  EXPECT_EQ(next[0].stage, "idle") << "idle work comes ahead of the round";
  EXPECT_EQ(next[0].candidate.id(), seeds[0].candidate.id());
  EXPECT_EQ(next[0].problems, std::vector<int>{1});
  for (size_t i = 1; i < next.size(); ++i) EXPECT_EQ(next[i].stage, "screen");
  EXPECT_TRUE(Said("while the screen round builds"));
}

// However large the new round, its idle work comes first: a round of more
// proposals than the caller takes at once used to leave no room for it, and
// the GPU waited on the round's first builds.
TEST_F(EmbeddedProposerTest, IdleWorkComesAheadOfARoundLargerThanOneCall) {
  SearchOptions search;
  search.screen_per_problem = 1;
  std::unique_ptr<EmbeddedProposer> e = Make(search);
  const std::vector<Proposal> seeds = SeedsWithABuiltPairLeft(*e);
  ASSERT_EQ(seeds.size(), 2u);
  const std::vector<Proposal> idle = Propose(*e);
  ASSERT_EQ(idle.size(), 1u);
  Observation skipped;
  skipped.proposal = idle[0];
  skipped.reason = "the job's budget is spent";
  const std::vector<Observation> none = {skipped};
  e->Observe(view_, none);
  Answer(*e, {seeds[1]});
  const std::vector<Proposal> first = Propose(*e, 1);  // one at a time: the round fills any call
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].stage, "idle");
  const std::vector<Proposal> second = Propose(*e, 1);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].stage, "screen") << "the round follows its idle work";
}

TEST_F(EmbeddedProposerTest, IgnoresAnAnswerToNoPendingProposal) {
  std::unique_ptr<EmbeddedProposer> e = Make();
  const std::vector<Proposal> probe = Propose(*e);
  ASSERT_EQ(probe.size(), 1u);
  Proposal stranger = probe[0];
  stranger.candidate.set_id(std::string(64, 'f'));
  Answer(*e, {stranger});
  Proposal recheck = probe[0];
  recheck.recheck = true;  // the same candidate, but not what was proposed
  Answer(*e, {recheck});
  EXPECT_TRUE(Propose(*e).empty());
  Answer(*e, probe);
  EXPECT_FALSE(Propose(*e).empty());
}

TEST_F(EmbeddedProposerTest, CallsOnDoneOnceOnTheCallersThreadWhenTheStagesEnd) {
  std::unique_ptr<EmbeddedProposer> e = Make();
  const std::vector<std::string> stages = RunToTheEnd(*e);
  // The probe, the seeds, the screen; nothing measured is in the store, so
  // no leaders to widen, specialise or evolve; then the winner's re-checks.
  EXPECT_EQ(stages, (std::vector<std::string>{"seeds", "seeds", "screen", "verify"}));
  ASSERT_EQ(done_.size(), 1u);
  EXPECT_EQ(done_on_, std::this_thread::get_id());
  ASSERT_TRUE(done_[0].ok()) << done_[0].status();
  ASSERT_EQ(done_[0]->problems.size(), 1u);
  EXPECT_FALSE(done_[0]->problems[0].best_candidate_id().empty());
  EXPECT_GT(done_[0]->problems[0].speedup(), 0);
  // Ended: nothing more, and no second call.
  EXPECT_TRUE(Propose(*e).empty());
  e->Observe(view_, {});
  e.reset();
  EXPECT_EQ(done_.size(), 1u);
}

TEST_F(EmbeddedProposerTest, TheFinalPhaseSkipsToTheReChecks) {
  std::unique_ptr<EmbeddedProposer> e = Make();
  Answer(*e, Propose(*e));
  Answer(*e, Propose(*e));  // the seeds
  const std::vector<Proposal> screen = Propose(*e);
  ASSERT_FALSE(screen.empty());
  view_.final_phase = true;  // the job's budget is spent: the screen is skipped
  std::vector<Observation> skipped;
  for (const Proposal& p : screen) {
    Observation o;
    o.proposal = p;
    o.reason = "the job's budget is spent";
    skipped.push_back(o);
  }
  e->Observe(view_, skipped);
  const std::vector<Proposal> verify = Propose(*e);
  ASSERT_EQ(verify.size(), static_cast<size_t>(SearchOptions().verify_runs));
  for (const Proposal& p : verify) {
    EXPECT_TRUE(p.recheck);
    EXPECT_EQ(p.stage, "verify");
  }
  Answer(*e, verify);
  EXPECT_TRUE(Propose(*e).empty());
  ASSERT_EQ(done_.size(), 1u);
  ASSERT_TRUE(done_[0].ok()) << done_[0].status();
  EXPECT_TRUE(done_[0]->budget_exhausted);
}

TEST_F(EmbeddedProposerTest, TheProbeBuildsOneConfigurationOfEachLayoutAndTheSeedsRoundTakesThemEverywhere) {
  for (auto [m, layout] : {std::pair{1, v1::LAYOUT_NN}, {2048, v1::LAYOUT_NT}, {8, v1::LAYOUT_NN}}) {
    ProblemView p = view_.problems[0];
    p.spec = {MakeShape(m, 4096, 1024), layout};
    p.name = absl::StrCat(m, "x4096x1024 ", layout == v1::LAYOUT_NT ? "nt" : "nn");
    view_.problems.push_back(p);
  }
  std::unique_ptr<EmbeddedProposer> e = Make();
  // One pair of each layout, each on one problem: they build side by side.
  const std::vector<Proposal> probe = Propose(*e);
  ASSERT_EQ(probe.size(), 2u);
  std::set<v1::Layout> layouts;
  for (const Proposal& p : probe) {
    ASSERT_EQ(p.problems.size(), 1u);
    EXPECT_EQ(view_.problems[p.problems[0]].spec.layout, p.candidate.layout());
    layouts.insert(p.candidate.layout());
  }
  EXPECT_EQ(layouts.size(), 2u);
  Answer(*e, probe);
  // The seeds round takes both, built already, on the other problems of
  // their layout: those are measured while the round's first builds run.
  const std::vector<Proposal> seeds = Propose(*e);
  for (const Proposal& p : probe) {
    std::set<int> others;
    for (size_t i = 0; i < view_.problems.size(); ++i) {
      if (view_.problems[i].spec.layout == p.candidate.layout() && int(i) != p.problems[0]) {
        others.insert(int(i));
      }
    }
    auto it = std::find_if(seeds.begin(), seeds.end(), [&](const Proposal& s) {
      return s.candidate.id() == p.candidate.id();
    });
    ASSERT_NE(it, seeds.end());
    for (int i : others) EXPECT_NE(std::find(it->problems.begin(), it->problems.end(), i), it->problems.end());
  }
}

TEST_F(EmbeddedProposerTest, AStageErrorEndsTheSearchAndEveryLaterProposeReturnsIt) {
  std::unique_ptr<EmbeddedProposer> e = Make();
  // No seed configuration builds: the probe tries each, then gives up.
  for (int i = 0; i < 2; ++i) {
    const std::vector<Proposal> probe = Propose(*e);
    ASSERT_EQ(probe.size(), 1u);
    const std::vector<Observation> failed = {BuildFailed(probe[0])};
    e->Observe(view_, failed);
  }
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<std::vector<Proposal>> got = e->Propose(view_, 10);
    EXPECT_EQ(got.status().code(), absl::StatusCode::kUnavailable) << got.status();
  }
  ASSERT_EQ(done_.size(), 1u);
  EXPECT_EQ(done_[0].status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(EmbeddedProposerTest, RefusesAFigureItCannotRank) {
  std::unique_ptr<EmbeddedProposer> e = Make();
  view_.figure = "fastest";
  EXPECT_EQ(e->Propose(view_, 10).status().code(), absl::StatusCode::kInvalidArgument);
  ASSERT_EQ(done_.size(), 1u);
  EXPECT_EQ(done_[0].status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(EmbeddedProposerTest, GoingAwayMidSearchEndsItCancelledOnce) {
  std::unique_ptr<EmbeddedProposer> never_asked = Make();
  never_asked.reset();
  EXPECT_TRUE(done_.empty());

  std::unique_ptr<EmbeddedProposer> e = Make();
  Answer(*e, Propose(*e));
  ASSERT_FALSE(Propose(*e).empty());  // a round pending
  e.reset();
  ASSERT_EQ(done_.size(), 1u);
  EXPECT_EQ(done_[0].status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(done_on_, std::this_thread::get_id());
}

}  // namespace
}  // namespace anvil
