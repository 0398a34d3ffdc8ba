// The coordinator's job loop on test doubles (tests/coordinator/fakes.h):
// a whole job with a real store, fairness across layouts, budgets, resume
// after a stop with nothing measured twice, cancellation, request ids, and
// budget shares between proposers.
#include "server/job_service.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <thread>

#include "absl/strings/match.h"
#include "tests/coordinator/fakes.h"

namespace anvil {
namespace {

using testing_fakes::FakeCandidate;
using testing_fakes::FakeClock;
using testing_fakes::FakeEvaluator;
using testing_fakes::ScriptedProposer;

class JobServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = ::testing::TempDir() + "/job_service_test_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".db";
    std::filesystem::remove(path_);
    store_ = Open();
  }
  std::unique_ptr<Store> Open() {
    absl::StatusOr<std::unique_ptr<Store>> s = Store::Open(path_);
    EXPECT_TRUE(s.ok()) << s.status();
    return std::move(*s);
  }
  // Problems: n_nt of layout nt, then n_nn of nn (M differs per problem).
  static v1::OptimizeKernelRequest Request(int n_nt, int n_nn) {
    v1::OptimizeKernelRequest r;
    for (int i = 0; i < n_nt + n_nn; ++i) {
      v1::Problem* p = r.add_problems();
      *p->mutable_shape() = MakeShape(1000 + 64 * i, 2048, 512);
      p->set_layout(i < n_nt ? v1::LAYOUT_NT : v1::LAYOUT_NN);
    }
    return r;
  }
  // For each problem of `r`, `per` candidates, slower first, so every one improves.
  static std::vector<std::vector<v1::Candidate>> Script(const v1::OptimizeKernelRequest& r, int per,
                                                        const std::string& tag = "s") {
    std::vector<std::vector<v1::Candidate>> s(r.problems_size());
    for (int p = 0; p < r.problems_size(); ++p) {
      for (int i = 0; i < per; ++i) {
        s[p].push_back(FakeCandidate(r.problems(p).layout(), 100.0 - i, absl::StrCat(tag, p, "_", i), i == 1));
      }
    }
    return s;
  }
  using Script_ = std::vector<std::vector<v1::Candidate>>;
  std::unique_ptr<JobService> Service(Script_ script, int pending = 256,
                                      CandidateEvaluator* evaluator = nullptr) {
    return Proposers({{"scripted", std::move(script)}}, pending, evaluator);
  }
  std::unique_ptr<JobService> Proposers(std::vector<std::pair<std::string, Script_>> scripts,
                                      int pending = 256, CandidateEvaluator* evaluator = nullptr) {
    JobServiceOptions o;
    o.store = store_.get();
    o.evaluator = evaluator != nullptr ? evaluator : &evaluator_;
    o.clock = [this] { return clock_.Now(); };
    o.default_figure = "device";
    o.build_chunk = 4;
    o.pending_per_proposer = pending;
    o.proposers = [this, scripts](const v1::OptimizeKernelRequest&)
        -> absl::StatusOr<std::vector<std::unique_ptr<Proposer>>> {
      std::vector<std::unique_ptr<Proposer>> out;
      for (const auto& [n, script] : scripts) {
        auto p = std::make_unique<ScriptedProposer>(n, script);
        p->fidelity = fidelity_;
        proposers_.push_back(p.get());
        out.push_back(std::move(p));
      }
      return out;
    };
    absl::StatusOr<std::unique_ptr<JobService>> s = JobService::Create(std::move(o));
    EXPECT_TRUE(s.ok()) << s.status();
    return std::move(*s);
  }

  // A job of screens on two nt problems and one nn, `per` candidates each
  // (one of them does not build), run to its end.
  absl::StatusOr<v1::Job> RunScreenJob(int per) {
    fidelity_ = v1::FIDELITY_SCREEN;
    const v1::OptimizeKernelRequest req = Request(2, 1);
    std::unique_ptr<JobService> service = Service(Script(req, per));
    absl::StatusOr<v1::Job> job = service->CreateJob(req);
    if (!job.ok()) return job.status();
    return service->RunJob(job->id());
  }

  std::string path_;
  std::unique_ptr<Store> store_;
  FakeClock clock_;
  FakeEvaluator evaluator_{&clock_};
  std::vector<ScriptedProposer*> proposers_;
  v1::Fidelity fidelity_ = v1::FIDELITY_FULL;  // of the scripted proposers' proposals
};

TEST_F(JobServiceTest, AJobRunsTheWholeLoopAndReportsVerifiedWinners) {
  const v1::OptimizeKernelRequest req = Request(2, 1);
  std::unique_ptr<JobService> service = Service(Script(req, 4));
  absl::StatusOr<v1::Job> job = service->CreateJob(req);
  ASSERT_TRUE(job.ok()) << job.status();
  std::vector<JobEvent> events;
  absl::StatusOr<std::unique_ptr<Watch>> w =
      service->WatchJob(job->id(), [&](const JobEvent& e) { events.push_back(e); });
  ASSERT_TRUE(w.ok());
  absl::StatusOr<v1::Job> done = service->RunJob(job->id());
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->state(), v1::JOB_STATE_SUCCEEDED);
  ASSERT_EQ(done->problems_size(), 3);
  for (const v1::ProblemProgress& p : done->problems()) {
    EXPECT_EQ(p.problem().gpu(), "FAKE-GPU");
    EXPECT_EQ(p.candidates_tried(), 3);  // 4 proposed, one did not build
    EXPECT_FALSE(p.best_candidate_id().empty()) << ProblemName(p.problem());
    EXPECT_NEAR(p.best_us(), 97.0 + p.problem().shape().m() / 1000.0, 1e-9);  // the fastest, re-checked
    EXPECT_GT(p.speedup(), 0);
    absl::StatusOr<std::optional<v1::Kernel>> best = store_->BestKernel(p.problem(), "device");
    ASSERT_TRUE(best.ok() && best->has_value());
    EXPECT_EQ((*best)->candidate().id(), p.best_candidate_id());
  }
  EXPECT_EQ(evaluator_.rechecked.size(), 3u);
  absl::StatusOr<std::vector<Reward>> rewards = store_->ListRewards(job->id());
  ASSERT_TRUE(rewards.ok());
  EXPECT_EQ(rewards->size(), 3u * 3 + 3 + 3);  // measurements, build failures, re-checks
  int bests = 0, built_failed = 0;
  for (const JobEvent& e : events) {
    bests += e.kind == JobEventKind::kNewBest;
    built_failed += e.kind == JobEventKind::kBuildFailed;
  }
  EXPECT_GE(bests, 3);
  EXPECT_EQ(built_failed, 3);
  EXPECT_EQ(events.back().kind, JobEventKind::kState);
  EXPECT_EQ(events.back().job.state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(events.back().usage.by_proposer.size(), 0u);  // the final state event is the store's job
  EXPECT_GT(events[events.size() - 2].usage.by_proposer.at("scripted").gpu_seconds, 0);
}

// Screens share a Measure call (one runner process), up to the batch size; a
// re-check has its own; the store and the rewards say which each was.
TEST_F(JobServiceTest, ScreensAreBatchedAndEveryMeasurementSaysItsFidelity) {
  absl::StatusOr<v1::Job> done = RunScreenJob(4);
  ASSERT_TRUE(done.ok()) << done.status();
  const v1::Job* job = &*done;
  size_t most = 0;
  for (const std::vector<MeasureRequest>& call : evaluator_.measure_calls) {
    most = std::max(most, call.size());
    for (const MeasureRequest& r : call) {
      EXPECT_EQ(r.fidelity, r.recheck ? v1::FIDELITY_FULL : v1::FIDELITY_SCREEN);
      if (r.recheck) {
        EXPECT_EQ(call.size(), 1u);
      }
      EXPECT_EQ(r.figure, "device");  // the job's figure
    }
  }
  EXPECT_GT(most, 1u);
  int screens = 0, full = 0;
  for (const v1::ProblemProgress& p : done->problems()) {
    absl::StatusOr<std::vector<StoredMeasurement>> history = store_->SearchHistory(p.problem(), job->id());
    ASSERT_TRUE(history.ok()) << history.status();
    for (const StoredMeasurement& m : *history) {
      const bool screen = m.measurement.fidelity() == v1::FIDELITY_SCREEN;
      screens += screen;
      full += !screen;
      EXPECT_EQ(screen, !m.measurement.verified());  // only re-checks verify, and they are full
    }
  }
  EXPECT_EQ(screens, 3 * 3);
  EXPECT_EQ(full, 3);
  absl::StatusOr<std::vector<Reward>> rewards = store_->ListRewards(job->id());
  ASSERT_TRUE(rewards.ok());
  int labelled = 0;
  for (const Reward& r : *rewards) labelled += absl::StrContains(r.details_json, R"("fidelity":"screen")");
  EXPECT_EQ(labelled, 3 * 3);
}

// A local GPU takes a second call while it measures one (it waits for the
// GPU): the rounds overlap (the next round's built proposals join the round
// being measured), and still every proposal is measured once, on each of
// its problems once, and the job ends with its winners verified.
TEST_F(JobServiceTest, AGpuHoldingASecondCallMeasuresEveryProposalOnce) {
  evaluator_.slots = 2;
  evaluator_.waiting = 1;
  // Longer than the coordinator's longest wait (1 s), so that the next
  // round's builds end while a call is measured.
  evaluator_.measure_delay = std::chrono::milliseconds(1100);
  absl::StatusOr<v1::Job> done = RunScreenJob(4);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(evaluator_.measured.size(), 3u * 3u);  // 4 proposed per problem, one did not build
  for (const auto& [key, times] : evaluator_.measured) {
    EXPECT_EQ(times, 1) << key.first << " on " << key.second;
  }
  for (const v1::ProblemProgress& p : done->problems()) {
    EXPECT_FALSE(p.best_candidate_id().empty()) << ProblemName(p.problem());
  }
  EXPECT_EQ(evaluator_.rechecked.size(), 3u);
}

// A proposer that plans every nt problem before any nn one (as the seed
// stage did) still leaves every problem a fair share of a tight budget.
TEST_F(JobServiceTest, ProblemsOfEveryLayoutGetAFairShareOfTheBudget) {
  v1::OptimizeKernelRequest req = Request(14, 14);
  req.mutable_budget()->set_max_gpu_seconds(140);  // 5 measurements per problem
  std::unique_ptr<JobService> service = Service(Script(req, 40), /*pending=*/2000);
  absl::StatusOr<v1::Job> job = service->CreateJob(req);
  ASSERT_TRUE(job.ok());
  absl::StatusOr<v1::Job> done = service->RunJob(job->id());
  ASSERT_TRUE(done.ok()) << done.status();
  int lo = 1 << 30, hi = 0, nt = 0, nn = 0;
  for (const v1::ProblemProgress& p : done->problems()) {
    lo = std::min(lo, p.candidates_tried());
    hi = std::max(hi, p.candidates_tried());
    (p.problem().layout() == v1::LAYOUT_NT ? nt : nn) += p.candidates_tried();
  }
  EXPECT_GE(lo, 3);
  EXPECT_LE(hi - lo, 2);
  EXPECT_LE(std::abs(nt - nn), 4) << nt << " nt, " << nn << " nn";
}

TEST_F(JobServiceTest, PerProblemCandidateBudgetAndPlateauStopProblems) {
  v1::OptimizeKernelRequest req = Request(1, 1);
  req.mutable_budget()->set_max_candidates(5);
  std::vector<std::vector<v1::Candidate>> script = Script(req, 20);
  // The second problem never improves after its first candidate: a plateau.
  for (int i = 0; i < 20; ++i) {
    script[1][i] = FakeCandidate(v1::LAYOUT_NN, 50.0 + i, absl::StrCat("flat", i));
  }
  req.mutable_budget()->set_plateau_candidates(3);
  std::unique_ptr<JobService> service = Service(script);
  absl::StatusOr<v1::Job> done = service->RunJob(service->CreateJob(req)->id());
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->problems(0).status(), "candidates");
  EXPECT_EQ(done->problems(0).candidates_tried(), 5);
  EXPECT_EQ(done->problems(1).status(), "plateau");
  EXPECT_EQ(done->problems(1).candidates_tried(), 4);  // the first, then three without a gain
}

TEST_F(JobServiceTest, TargetEfficiencyAndWallTimeStopTheJob) {
  v1::OptimizeKernelRequest req = Request(1, 0);
  evaluator_.efficiency_per_us = 90;  // efficiency 0.9 at 100 us... reached at ~98 us
  req.mutable_budget()->set_target_efficiency(0.92);
  std::unique_ptr<JobService> service = Service(Script(req, 30));
  absl::StatusOr<v1::Job> done = service->RunJob(service->CreateJob(req)->id());
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->problems(0).status(), "target");
  EXPECT_LT(done->problems(0).candidates_tried(), 10);

  v1::OptimizeKernelRequest timed = Request(0, 1);
  timed.mutable_budget()->set_max_wall_seconds(6);  // the fake clock: 1 s per measurement
  std::unique_ptr<JobService> other = Service(Script(timed, 30));
  absl::StatusOr<v1::Job> t = other->RunJob(other->CreateJob(timed)->id());
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_LE(t->problems(0).candidates_tried(), 6 + 4);  // at most the round in flight past it
  EXPECT_GE(t->wall_seconds(), 6);
}

TEST_F(JobServiceTest, AStoppedJobResumesWithNothingMeasuredTwice) {
  const v1::OptimizeKernelRequest req = Request(2, 2);
  const std::vector<std::vector<v1::Candidate>> script = Script(req, 6);
  std::string id;
  int first_run = 0;
  {
    std::unique_ptr<JobService> service = Service(script);
    id = service->CreateJob(req)->id();
    std::mutex mu;
    std::condition_variable cv;
    int measured = 0;
    absl::StatusOr<std::unique_ptr<Watch>> w = service->WatchJob(id, [&](const JobEvent& e) {
      std::lock_guard<std::mutex> lock(mu);
      measured += e.kind == JobEventKind::kMeasured;
      cv.notify_all();
    });
    ASSERT_TRUE(service->StartJob(id).ok());
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return measured >= 6; });
    }
    service->Shutdown();  // the process goes away at a checkpoint
    first_run = evaluator_.measured_total;
  }
  absl::StatusOr<v1::Job> stopped = store_->GetJob(id);
  ASSERT_TRUE(stopped.ok());
  EXPECT_EQ(stopped->state(), v1::JOB_STATE_RUNNING);
  EXPECT_LT(first_run, 4 * 5);
  FakeEvaluator restarted(&clock_);  // a new process: it does not know the GPU yet
  std::unique_ptr<JobService> again = Service(script, 256, &restarted);
  absl::StatusOr<v1::Job> done = again->RunJob(id);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->state(), v1::JOB_STATE_SUCCEEDED);
  std::map<std::pair<std::string, std::string>, int> both = evaluator_.measured;
  for (const auto& [pair, times] : restarted.measured) both[pair] += times;
  for (const auto& [pair, times] : both) EXPECT_EQ(times, 1) << pair.first << " " << pair.second;
  EXPECT_EQ(both.size(), 4u * 5);  // every buildable candidate, once
  EXPECT_GT(restarted.measured.size(), 0u);
  for (const v1::ProblemProgress& p : done->problems()) EXPECT_EQ(p.candidates_tried(), 5);
  EXPECT_GE(done->wall_seconds(), evaluator_.measured_total + restarted.measured_total);
}

TEST_F(JobServiceTest, CancelStopsAJobAndKeepsWhatItMeasured) {
  const v1::OptimizeKernelRequest req = Request(2, 0);
  std::unique_ptr<JobService> service = Service(Script(req, 50));
  const std::string id = service->CreateJob(req)->id();
  std::mutex mu;
  std::condition_variable cv;
  int measured = 0;
  bool ended = false;
  absl::StatusOr<std::unique_ptr<Watch>> w = service->WatchJob(id, [&](const JobEvent& e) {
    std::lock_guard<std::mutex> lock(mu);
    measured += e.kind == JobEventKind::kMeasured;
    ended |= e.kind == JobEventKind::kState && e.job.state() == v1::JOB_STATE_CANCELLED;
    cv.notify_all();
  });
  ASSERT_TRUE(service->StartJob(id).ok());
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return measured >= 4; });
  }
  absl::StatusOr<v1::Job> c = service->CancelJob(id);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->state(), v1::JOB_STATE_CANCELLED);
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return ended; });
  }
  service->Shutdown();
  EXPECT_LT(evaluator_.measured_total, 2 * 49);
  absl::StatusOr<StoreCounts> counts = store_->Counts();
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->measurements, evaluator_.measured_total);
  EXPECT_EQ(service->CancelJob(id).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(service->StartJob(id).code(), absl::StatusCode::kFailedPrecondition);
}

// A watch set up just as its job ends gets the final state, exactly once:
// its first event's callback is slow (as a stream's first write may be), and
// the job finishes on its own thread meanwhile; or the watch comes after the
// end. Neither misses the end nor hangs.
TEST_F(JobServiceTest, AWatchAttachingAsItsJobEndsGetsTheFinalStateOnce) {
  const v1::OptimizeKernelRequest req = Request(1, 0);
  std::unique_ptr<JobService> service = Service(Script(req, 3));
  for (int after_ms : {0, 0, 0, 2, 20, 400}) {  // the job takes a few ms
    const std::string id = service->CreateJob(req)->id();
    ASSERT_TRUE(service->StartJob(id).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(after_ms));
    std::mutex mu;
    std::condition_variable cv;
    int finals = 0, events = 0;
    absl::StatusOr<std::unique_ptr<Watch>> w = service->WatchJob(id, [&](const JobEvent& e) {
      const bool final = e.kind == JobEventKind::kState && e.job.state() == v1::JOB_STATE_SUCCEEDED;
      if (events++ == 0 && !final) std::this_thread::sleep_for(std::chrono::milliseconds(200));
      std::lock_guard<std::mutex> lock(mu);
      finals += final;
      cv.notify_all();
    });
    ASSERT_TRUE(w.ok()) << w.status();
    {
      std::unique_lock<std::mutex> lock(mu);
      ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return finals > 0; }))
          << "the watch attached " << after_ms << " ms after the start never saw the job end";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(finals, 1) << after_ms;
    EXPECT_EQ(store_->GetJob(id)->state(), v1::JOB_STATE_SUCCEEDED);
  }
}

TEST_F(JobServiceTest, EveryRunReportsTheCoordinatorsOwnTimePerCandidate) {
  const v1::OptimizeKernelRequest req = Request(2, 0);
  std::unique_ptr<JobService> service = Service(Script(req, 4));
  const std::string id = service->CreateJob(req)->id();
  std::vector<JobEvent> logs;
  absl::StatusOr<std::unique_ptr<Watch>> w = service->WatchJob(id, [&](const JobEvent& e) {
    if (e.kind == JobEventKind::kLog) logs.push_back(e);
  });
  ASSERT_TRUE(service->RunJob(id).ok());
  ASSERT_FALSE(logs.empty());
  const JobEvent& last = logs.back();
  EXPECT_EQ(last.message.rfind("coordinator overhead: ", 0), 0u) << last.message;
  const CoordinatorTime& c = last.usage.coordinator;
  EXPECT_EQ(c.candidates, evaluator_.measured_total + 2) << "measured (re-checks included), one failed build per problem";
  EXPECT_GT(c.wall_seconds, 0);
  EXPECT_GE(c.overhead_seconds(), 0);
  EXPECT_LE(c.evaluator_seconds + c.proposer_seconds, c.wall_seconds);
  EXPECT_NEAR(c.overhead_ms_per_candidate(), 1000 * c.overhead_seconds() / c.candidates, 1e-9);
}

TEST_F(JobServiceTest, ARequestIdMakesCreateIdempotent) {
  std::unique_ptr<JobService> service = Service(Script_{});
  const v1::OptimizeKernelRequest req = Request(1, 0);
  absl::StatusOr<v1::Job> a = service->CreateJob(req, "req-1");
  absl::StatusOr<v1::Job> b = service->CreateJob(req, "req-1");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->id(), b->id());
  EXPECT_EQ(a->request_id(), "req-1");
  EXPECT_EQ(service->CreateJob(Request(2, 0), "req-1").status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(service->CreateJob(Request(0, 0)).status().code(), absl::StatusCode::kInvalidArgument);
  v1::OptimizeKernelRequest bad = Request(1, 0);
  bad.set_reward_figure("fastest");
  EXPECT_EQ(service->CreateJob(bad).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(service->GetJob("job-none").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(JobServiceTest, TwoProposersShareTheGpuTimeEqually) {
  v1::OptimizeKernelRequest req = Request(2, 2);
  req.mutable_budget()->set_max_gpu_seconds(40);
  std::unique_ptr<JobService> service =
      Proposers({{"first", Script(req, 30, "a")}, {"second", Script(req, 30, "b")}});
  absl::StatusOr<v1::Job> job = service->CreateJob(req);
  ASSERT_TRUE(job.ok());
  BudgetUsage last;
  absl::StatusOr<std::unique_ptr<Watch>> w = service->WatchJob(job->id(), [&](const JobEvent& e) {
    if (!e.usage.by_proposer.empty()) last = e.usage;
  });
  ASSERT_TRUE(service->RunJob(job->id()).ok());
  ASSERT_EQ(last.by_proposer.size(), 2u);
  const double first = last.by_proposer.at("first").gpu_seconds;
  const double second = last.by_proposer.at("second").gpu_seconds;
  EXPECT_GE(first + second, 40);
  EXPECT_LE(std::abs(first - second), 4) << first << " s and " << second << " s";
}

}  // namespace
}  // namespace anvil
