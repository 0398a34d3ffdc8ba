// ProgressDisplay: plain lines off a terminal (no escape codes), a block
// redrawn in place on one, --quiet and --verbose, colour only when asked.
#include "cli/progress.h"

#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace anvil::cli {
namespace {

using Kind = ProgressEvent::Kind;

ProgressEvent Event(Kind kind, const std::string& message) {
  ProgressEvent e;
  e.kind = kind;
  e.message = message;
  e.job_id = "job-7";
  e.elapsed_s = 120;
  e.budget_s = 600;
  e.problems_total = 2;
  e.problems_measured = 1;
  e.builds = 30;
  e.build_failures = 3;
  e.measurements = 90;
  e.best = {{"4096x4096x4096 nt", 1.0625}, {"16x4096x4096 nt", 0}};
  return e;
}

TEST(ProgressDisplayTest, PlainLinesOffATerminal) {
  std::ostringstream out;
  ProgressDisplay d(out, DisplayOptions{});
  d.Handle(Event(Kind::kTick, ""));
  d.Handle(Event(Kind::kNewBest, "[screen] 4096x4096x4096 nt 1.000x -> 1.062x"));
  d.Handle(Event(Kind::kMeasured, "one measurement"));
  d.Handle(Event(Kind::kBuildFailed, "[evolve-1] k did not build: ptxas"));
  d.Finish();
  EXPECT_EQ(out.str(), "[screen] 4096x4096x4096 nt 1.000x -> 1.062x\n[evolve-1] k did not build: ptxas\n");
}

TEST(ProgressDisplayTest, VerboseAddsMeasurementsQuietPrintsNothing) {
  std::ostringstream verbose, quiet;
  DisplayOptions v;
  v.verbosity = 2;
  DisplayOptions q;
  q.verbosity = 0;
  ProgressDisplay dv(verbose, v), dq(quiet, q);
  for (ProgressDisplay* d : {&dv, &dq}) {
    d->Handle(Event(Kind::kMeasured, "one measurement"));
    d->Handle(Event(Kind::kState, ""));
  }
  EXPECT_EQ(verbose.str(), "one measurement\njob job-7 running\n");
  EXPECT_EQ(quiet.str(), "");
}

TEST(ProgressDisplayTest, LiveBlockIsRedrawnInPlace) {
  std::ostringstream out;
  DisplayOptions o;
  o.live = true;
  ProgressDisplay d(out, o);
  d.Handle(Event(Kind::kTick, ""));
  const std::string first = out.str();
  EXPECT_NE(first.find("anvil job-7"), std::string::npos);
  EXPECT_NE(first.find("2:00 of 10:00"), std::string::npos);
  EXPECT_NE(first.find("20%"), std::string::npos);
  EXPECT_NE(first.find("builds 30 (3 failed, 15.0/min)"), std::string::npos);
  EXPECT_NE(first.find("measurements 90 (45.0/min)"), std::string::npos);
  EXPECT_NE(first.find("4096x4096x4096 nt 1.062x"), std::string::npos);
  EXPECT_NE(first.find("16x4096x4096 nt -"), std::string::npos);
  EXPECT_EQ(first.find("\x1b["), std::string::npos);  // nothing to move over yet, no colour
  d.Handle(Event(Kind::kLog, "[widen] 12 configurations"));
  const std::string second = out.str().substr(first.size());
  EXPECT_EQ(second.rfind("\x1b[3F\x1b[J[widen] 12 configurations\n", 0), 0u) << second;
  EXPECT_NE(second.find("anvil job-7"), std::string::npos);  // the block again, below the line
}

TEST(ProgressDisplayTest, ColourOnlyWhenAsked) {
  std::ostringstream out;
  DisplayOptions o;
  o.live = true;
  o.color = true;
  ProgressDisplay d(out, o);
  d.Handle(Event(Kind::kTick, ""));
  EXPECT_NE(out.str().find("\x1b[32m1.062x\x1b[0m"), std::string::npos);
}

TEST(ProgressDisplayTest, StdoutThatIsNotATerminalIsPlain) {
  // ctest runs tests with stdout on a pipe or file.
  DisplayOptions o = StdoutDisplayOptions(false, true);
  EXPECT_FALSE(o.live);
  EXPECT_FALSE(o.color);
  EXPECT_EQ(o.verbosity, 2);
  EXPECT_EQ(StdoutDisplayOptions(true, false).verbosity, 0);
}

TEST(ProgressDisplayTest, JobEventsCarryTheRunsTotals) {
  JobEvent ev;
  ev.kind = JobEventKind::kProblemDone;
  ev.message = "16x4096x4096 nt done (plateau)";
  ev.job.set_id("job-9");
  ev.job.set_state(v1::JOB_STATE_RUNNING);
  for (double speedup : {1.25, 0.0}) {
    v1::ProblemProgress* p = ev.job.add_problems();
    p->mutable_problem()->mutable_shape()->set_m(16);
    p->mutable_problem()->mutable_shape()->set_n(4096);
    p->mutable_problem()->mutable_shape()->set_k(4096);
    p->set_candidates_tried(speedup > 0 ? 40 : 0);
    p->set_speedup(speedup);
  }
  ev.usage.wall_seconds = 90;
  ev.usage.max_wall_seconds = 600;
  ev.usage.candidates = 40;
  ev.usage.by_proposer["embedded"].built = 30;
  ev.usage.by_proposer["embedded"].build_failures = 2;
  ev.usage.by_proposer["llm"].built = 5;
  ev.usage.by_proposer["llm"].build_failures = 1;
  ProgressEvent e = FromJobEvent(ev);
  EXPECT_EQ(e.kind, Kind::kLog);  // a problem stopping is a line for a person
  EXPECT_EQ(e.message, "  16x4096x4096 nt done (plateau)");
  EXPECT_EQ(e.job_id, "job-9");
  EXPECT_EQ(e.state, "running");
  EXPECT_EQ(e.elapsed_s, 90);
  EXPECT_EQ(e.budget_s, 600);
  EXPECT_EQ(e.builds, 35);
  EXPECT_EQ(e.build_failures, 3);
  EXPECT_EQ(e.measurements, 40);
  EXPECT_EQ(e.problems_total, 2);
  EXPECT_EQ(e.problems_measured, 1);
  ASSERT_EQ(e.best.size(), 2u);
  EXPECT_DOUBLE_EQ(e.best[0].second, 1.25);
  ev.kind = JobEventKind::kMeasured;
  EXPECT_EQ(FromJobEvent(ev).kind, Kind::kMeasured);
  ev.kind = JobEventKind::kNewBest;
  EXPECT_EQ(FromJobEvent(ev).kind, Kind::kNewBest);
}

}  // namespace
}  // namespace anvil::cli
