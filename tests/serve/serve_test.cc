// End to end: a real anvil_test_server process (ServeMain with the
// coordinator's FakeEvaluator and ScriptedProposer) over loopback gRPC, a real
// store, and the real client. What a client of `anvil serve` relies on.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "proto/problem.h"
#include "server/rpc/client.h"
#include "store/store.h"
#include "tests/serve/server_process.h"

namespace anvil {
namespace {

using testing_serve::ServerProcess;

class ServeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(::testing::TempDir(), "/serve_",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    db_ = dir_ + "/anvil.db";
    server_ = std::make_unique<ServerProcess>(ANVIL_TEST_SERVER, db_, dir_);
  }

  std::unique_ptr<KernelSearchClient> Client(const std::string& token = "") {
    ClientOptions o;
    o.target = server_->target();
    o.token = token;
    absl::StatusOr<std::unique_ptr<KernelSearchClient>> c = KernelSearchClient::Connect(o);
    EXPECT_TRUE(c.ok()) << c.status();
    return *std::move(c);
  }

  static v1::OptimizeKernelRequest Request(std::vector<std::string> shapes, const std::string& request_id = "") {
    v1::OptimizeKernelRequest r;
    for (const std::string& s : shapes) {
      v1::Problem* p = r.add_problems();
      *p->mutable_shape() = *ParseShape(s);
      p->set_layout(v1::LAYOUT_NT);
    }
    r.set_request_id(request_id);
    return r;
  }

  // Runs a job to its end, returning its events.
  std::vector<v1::JobProgress> RunToEnd(KernelSearchClient& c, const v1::OptimizeKernelRequest& r) {
    std::vector<v1::JobProgress> events;
    absl::Status st = c.OptimizeKernel(r, [&](const v1::JobProgress& p) {
      events.push_back(p);
      return true;
    });
    EXPECT_TRUE(st.ok()) << st;
    return events;
  }

  std::string dir_, db_;
  std::unique_ptr<ServerProcess> server_;
};

int Count(const std::vector<v1::JobProgress>& events, const std::string& kind) {
  int n = 0;
  for (const v1::JobProgress& e : events) n += e.event() == kind;
  return n;
}

TEST_F(ServeTest, AJobCompletesAndItsWinnersAreListed) {
  ASSERT_TRUE(server_->Start());
  auto c = Client();
  ASSERT_TRUE(*c->Serving());
  std::vector<v1::JobProgress> events = RunToEnd(*c, Request({"128x256x64", "2048x512x512"}));
  ASSERT_FALSE(events.empty());
  const v1::Job& last = events.back().job();
  EXPECT_EQ(last.state(), v1::JOB_STATE_SUCCEEDED) << last.error();
  std::set<std::pair<std::string, std::string>> pairs;  // (candidate, problem) measured
  for (const v1::JobProgress& e : events) {
    if (e.event() == "measured") pairs.insert({e.measurement().candidate_id(), ProblemName(e.measurement().problem())});
  }
  EXPECT_EQ(pairs.size(), 12u);  // 6 candidates x 2 problems, every one streamed
  EXPECT_GE(Count(events, "new_best"), 2);
  ASSERT_EQ(last.problems_size(), 2);
  absl::StatusOr<v1::ListKernelsResponse> kernels = c->ListKernels({});
  ASSERT_TRUE(kernels.ok()) << kernels.status();
  ASSERT_EQ(kernels->kernels_size(), 2);
  std::set<std::string> winners;
  for (const v1::ProblemProgress& p : last.problems()) winners.insert(p.best_candidate_id());
  for (const v1::Kernel& k : kernels->kernels()) EXPECT_TRUE(winners.count(k.candidate().id())) << k.candidate().name();
  v1::ListKernelsRequest by_job;
  by_job.set_job_id(last.id());
  EXPECT_EQ(c->ListKernels(by_job)->kernels_size(), 2);
  v1::GetKernelRequest gk;
  gk.set_candidate_id(kernels->kernels(0).candidate().id());
  absl::StatusOr<v1::Kernel> k = c->GetKernel(gk);
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_FALSE(k->candidate().source().empty());
  absl::StatusOr<v1::ListJobsResponse> jobs = c->ListJobs({});
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->jobs_size(), 1);
  EXPECT_EQ(jobs->jobs(0).id(), last.id());
  // A watch of an ended job: its final state, then the end.
  std::vector<v1::JobProgress> watched;
  ASSERT_TRUE(c->WatchJob(last.id(), [&](const v1::JobProgress& p) { watched.push_back(p); return true; }).ok());
  ASSERT_FALSE(watched.empty());
  EXPECT_EQ(watched.back().job().state(), v1::JOB_STATE_SUCCEEDED);
}

TEST_F(ServeTest, ReplayedRequestIdReturnsTheSameJob) {
  ASSERT_TRUE(server_->Start());
  auto c = Client();
  v1::OptimizeKernelRequest r = Request({"256x256x256"}, "retry-42");
  std::vector<v1::JobProgress> first = RunToEnd(*c, r);
  std::vector<v1::JobProgress> replay = RunToEnd(*c, r);
  ASSERT_FALSE(first.empty());
  ASSERT_FALSE(replay.empty());
  EXPECT_EQ(first.back().job().id(), replay.back().job().id());
  EXPECT_EQ(Count(replay, "measured"), 0);  // nothing searched again
  EXPECT_EQ(c->ListJobs({})->jobs_size(), 1);
  v1::OptimizeKernelRequest other = Request({"512x256x256"}, "retry-42");
  absl::Status st = c->OptimizeKernel(other, [](const v1::JobProgress&) { return true; });
  EXPECT_EQ(st.code(), absl::StatusCode::kAlreadyExists) << st;
}

TEST_F(ServeTest, MalformedRequestsGetTheRightCodes) {
  ASSERT_TRUE(server_->Start());
  auto c = Client();
  auto optimize = [&](const v1::OptimizeKernelRequest& r) {
    return c->OptimizeKernel(r, [](const v1::JobProgress&) { return true; }).code();
  };
  v1::OptimizeKernelRequest zero = Request({"128x128x128"});
  zero.mutable_problems(0)->mutable_shape()->set_m(0);
  EXPECT_EQ(optimize(zero), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(optimize(v1::OptimizeKernelRequest()), absl::StatusCode::kInvalidArgument);
  v1::OptimizeKernelRequest figure = Request({"128x128x128"});
  figure.set_reward_figure("fastest");
  EXPECT_EQ(optimize(figure), absl::StatusCode::kInvalidArgument);
  v1::OptimizeKernelRequest other_gpu = Request({"128x128x128"});
  other_gpu.mutable_problems(0)->set_gpu("H200-SXM-141GB");  // this server measures FAKE-GPU
  EXPECT_EQ(optimize(other_gpu), absl::StatusCode::kUnavailable);
  EXPECT_EQ(c->GetJob("job-does-not-exist").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(c->GetJob("").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c->CancelJob("job-does-not-exist").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(c->WatchJob("job-does-not-exist", [](const v1::JobProgress&) { return true; }).code(),
            absl::StatusCode::kNotFound);
  v1::GetKernelRequest gk;
  gk.set_candidate_id("0123");
  EXPECT_EQ(c->GetKernel(gk).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(c->GetKernel({}).status().code(), absl::StatusCode::kInvalidArgument);
  v1::ListKernelsRequest lk;
  lk.set_figure("median");
  EXPECT_EQ(c->ListKernels(lk).status().code(), absl::StatusCode::kInvalidArgument);
  v1::ExportLibraryRequest off;  // this server has no export.root
  off.set_output_dir("pkg");
  EXPECT_EQ(c->ExportLibrary(off).status().code(), absl::StatusCode::kFailedPrecondition);
  // Shapes no GPU could hold, and budgets that are not numbers, are refused
  // up front; both proposers together are a documented form.
  v1::OptimizeKernelRequest huge = Request({"1000000000x1000000000x1000000000"});
  EXPECT_EQ(optimize(huge), absl::StatusCode::kInvalidArgument);
  for (double bad : {std::nan(""), std::numeric_limits<double>::infinity(), -1.0}) {
    v1::OptimizeKernelRequest budget = Request({"128x128x128"});
    budget.mutable_budget()->set_max_wall_seconds(bad);
    EXPECT_EQ(optimize(budget), absl::StatusCode::kInvalidArgument) << bad;
    budget.mutable_budget()->set_max_wall_seconds(0);
    budget.mutable_budget()->set_plateau_candidates(bad);
    EXPECT_EQ(optimize(budget), absl::StatusCode::kInvalidArgument) << bad;
  }
  v1::OptimizeKernelRequest both = Request({"128x128x128"});
  both.set_proposer("embedded,llm");  // accepted by the request check; this server has no LLM endpoint
  const absl::Status st = c->OptimizeKernel(both, [](const v1::JobProgress&) { return true; });
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_NE(st.message().find("no LLM endpoint"), std::string::npos) << st;
  both.set_proposer("embedded,embedded");
  EXPECT_EQ(optimize(both), absl::StatusCode::kInvalidArgument);
}

// A job that cannot be resumed (it names the LLM proposer, and the server
// restarts without the LLM endpoint) fails alone, with the reason: the
// server starts and the other interrupted job goes on. It used to keep the
// server from starting at all.
TEST_F(ServeTest, AJobThatCannotBeResumedFailsAloneAndTheServerStarts) {
  ASSERT_TRUE(server_->Start({}, {{"ANVIL_TEST_LLM", "1"}, {"ANVIL_TEST_MEASURE_MS", "300"},
                                  {"ANVIL_TEST_CANDIDATES", "20"}}));
  auto detach = [&](v1::OptimizeKernelRequest r) {
    std::string id;
    auto c = Client();
    EXPECT_TRUE(c->OptimizeKernel(r, [&](const v1::JobProgress& p) {
                   id = p.job().id();
                   return false;
                 }).ok());
    return id;
  };
  v1::OptimizeKernelRequest with_llm = Request({"128x128x128"});
  with_llm.set_proposer("llm");
  const std::string llm_job = detach(with_llm);
  const std::string plain_job = detach(Request({"256x128x128"}));
  ASSERT_FALSE(llm_job.empty());
  ASSERT_FALSE(plain_job.empty());
  server_->Kill(SIGKILL);
  server_->Wait(std::chrono::seconds(10));
  ASSERT_TRUE(server_->Start()) << "one job that cannot be resumed kept the server down: " << server_->log(2);
  auto c = Client();
  absl::StatusOr<v1::Job> failed = c->GetJob(llm_job);
  ASSERT_TRUE(failed.ok()) << failed.status();
  EXPECT_EQ(failed->state(), v1::JOB_STATE_FAILED);
  EXPECT_NE(failed->error().find("could not be resumed"), std::string::npos) << failed->error();
  EXPECT_NE(failed->error().find("no LLM endpoint"), std::string::npos) << failed->error();
  std::vector<v1::JobProgress> events;
  ASSERT_TRUE(c->WatchJob(plain_job, [&](const v1::JobProgress& p) {
                 events.push_back(p);
                 return true;
               }).ok());
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().job().state(), v1::JOB_STATE_SUCCEEDED);
}

// ExportLibrary runs `anvil export`'s code on the server's store, writing
// only below export.root; bad arguments and no winners get their codes.
TEST_F(ServeTest, ExportLibraryWritesThePackageBelowTheExportRoot) {
  const std::string root = dir_ + "/exports";
  std::filesystem::create_directories(root);
  ASSERT_TRUE(server_->Start({"--export-root", root}));
  auto c = Client();
  auto code = [&](const std::function<void(v1::ExportLibraryRequest&)>& edit) {
    v1::ExportLibraryRequest r;
    r.set_output_dir("pkg");
    edit(r);
    return c->ExportLibrary(r).status().code();
  };
  // Before any job the store knows no GPU: the server's own is an unknown one.
  EXPECT_EQ(code([](auto&) {}), absl::StatusCode::kInvalidArgument);
  std::vector<v1::JobProgress> events = RunToEnd(*c, Request({"128x256x64", "2048x512x512"}));
  ASSERT_EQ(events.back().job().state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(code([](auto& r) { r.set_output_dir(""); }), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code([](auto& r) { r.set_output_dir("../outside"); }), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code([&](auto& r) { r.set_output_dir(dir_ + "/elsewhere"); }), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code([](auto& r) { r.set_output_dir("."); }), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code([](auto& r) { r.set_margin(1.5); }), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code([](auto& r) { r.set_gpu("H200-SXM-141GB"); }), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code([](auto& r) { *r.add_problems()->mutable_shape() = MakeShape(0, 8, 8); }),
            absl::StatusCode::kInvalidArgument);
  // No winner clears a 99% margin: nothing to export.
  EXPECT_EQ(code([](auto& r) { r.set_margin(0.99); }), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(std::filesystem::exists(root + "/pkg")) << "a refused export leaves nothing";
  v1::ExportLibraryRequest ok;
  ok.set_output_dir("pkg");
  absl::StatusOr<v1::ExportLibraryResponse> r = c->ExportLibrary(ok);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->output_dir(), std::filesystem::weakly_canonical(root + "/pkg").string());
  EXPECT_EQ(r->kernels(), 2) << "both winners beat the fake baseline";
  ASSERT_EQ(r->shapes_size(), r->kernels() + r->fallbacks());
  for (const v1::ExportedShape& s : r->shapes()) {
    EXPECT_EQ(s.path() == "kernel", !s.kernel().empty()) << s.path();
  }
  for (const char* f : {".anvil-export", "manifest.json", "CMakeLists.txt"}) {
    EXPECT_TRUE(std::filesystem::exists(root + "/pkg/" + f)) << f;
  }
  // Asked again: the previous export is replaced (same files).
  EXPECT_TRUE(c->ExportLibrary(ok).ok());
}

TEST_F(ServeTest, DeadlinesEndTheStreamNotTheJob) {
  ASSERT_TRUE(server_->Start({}, {{"ANVIL_TEST_MEASURE_MS", "50"}}));
  ClientOptions o;
  o.target = server_->target();
  o.stream_timeout = absl::Milliseconds(300);
  auto c = *KernelSearchClient::Connect(o);
  std::string job_id;
  absl::Status st = c->OptimizeKernel(Request({"128x128x128"}), [&](const v1::JobProgress& p) {
    job_id = p.job().id();
    return true;
  });
  EXPECT_EQ(st.code(), absl::StatusCode::kDeadlineExceeded) << st;
  ASSERT_FALSE(job_id.empty());
  auto patient = Client();
  std::vector<v1::JobProgress> rest;
  ASSERT_TRUE(patient->WatchJob(job_id, [&](const v1::JobProgress& p) { rest.push_back(p); return true; }).ok());
  EXPECT_EQ(rest.back().job().state(), v1::JOB_STATE_SUCCEEDED);
}

TEST_F(ServeTest, AnUnauthenticatedClientIsRefused) {
  ASSERT_TRUE(server_->Start({}, {{"ANVIL_AUTH_TOKEN", "correct horse"}}));
  auto none = Client();
  EXPECT_EQ(none->ListJobs({}).status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(none->OptimizeKernel(Request({"128x128x128"}), [](const v1::JobProgress&) { return true; }).code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(Client("battery staple")->ListJobs({}).status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(Client("correct horse")->ListJobs({}).ok());
  EXPECT_TRUE(*none->Serving());  // health stays open for probes
  EXPECT_TRUE(Client("correct horse")->ListJobs({})->jobs().empty());  // nothing was started
}

TEST_F(ServeTest, TwentyConcurrentClientsWithJobsAndWatches) {
  ASSERT_TRUE(server_->Start({}, {{"ANVIL_TEST_MEASURE_MS", "2"}, {"ANVIL_TEST_CANDIDATES", "4"}}));
  constexpr int kClients = 20;
  std::atomic<int> succeeded{0}, watched_to_end{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      auto c = Client();
      std::string job_id;
      v1::JobState end = v1::JOB_STATE_UNSPECIFIED;
      absl::Status st = c->OptimizeKernel(Request({absl::StrCat(64 * (i + 1), "x128x128")}),
                                          [&](const v1::JobProgress& p) {
                                            job_id = p.job().id();
                                            end = p.job().state();
                                            return true;
                                          });
      if (st.ok() && end == v1::JOB_STATE_SUCCEEDED) ++succeeded;
      // A second client watches the job it started (ended by now: one event).
      auto w = Client();
      v1::JobState seen = v1::JOB_STATE_UNSPECIFIED;
      if (w->WatchJob(job_id, [&](const v1::JobProgress& p) { seen = p.job().state(); return true; }).ok() &&
          seen == v1::JOB_STATE_SUCCEEDED) {
        ++watched_to_end;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(succeeded.load(), kClients);
  EXPECT_EQ(watched_to_end.load(), kClients);
  EXPECT_EQ(Client()->ListJobs({})->jobs_size(), kClients);
}

TEST_F(ServeTest, KilledMidJobResumesFromTheStoreMeasuringNothingTwice) {
  const std::map<std::string, std::string> env = {{"ANVIL_TEST_MEASURE_MS", "40"},
                                                  {"ANVIL_TEST_CANDIDATES", "30"}};
  ASSERT_TRUE(server_->Start({}, env));
  std::string job_id;
  int measured_before = 0;
  {
    auto c = Client();
    absl::Status st = c->OptimizeKernel(Request({"128x128x128", "256x128x128"}), [&](const v1::JobProgress& p) {
      job_id = p.job().id();
      measured_before += p.event() == "measured";
      return measured_before < 20;  // then leave the job running
    });
    ASSERT_TRUE(st.ok()) << st;
  }
  server_->Kill(SIGKILL);
  ASSERT_EQ(server_->Wait(std::chrono::seconds(10)), 128 + SIGKILL);
  ASSERT_TRUE(server_->Start({}, env));
  auto c = Client();
  std::vector<v1::JobProgress> rest;
  ASSERT_TRUE(c->WatchJob(job_id, [&](const v1::JobProgress& p) { rest.push_back(p); return true; }).ok());
  ASSERT_FALSE(rest.empty());
  EXPECT_EQ(rest.back().job().state(), v1::JOB_STATE_SUCCEEDED) << rest.back().job().error();
  server_->Kill(SIGTERM);
  ASSERT_EQ(server_->Wait(std::chrono::seconds(20)), 0);
  // The store: every (candidate, problem) pair of the job measured exactly once
  // outside re-checks, all 60 of them.
  StoreOptions ro;
  ro.read_only = true;
  auto store = *Store::Open(db_, ro);
  absl::StatusOr<v1::Job> job = store->GetJob(job_id);
  ASSERT_TRUE(job.ok());
  int pairs = 0;
  for (const v1::ProblemProgress& p : job->problems()) {
    absl::StatusOr<std::vector<StoredMeasurement>> h = store->SearchHistory(p.problem(), job_id);
    ASSERT_TRUE(h.ok());
    std::map<std::string, int> unverified;
    for (const StoredMeasurement& m : *h) unverified[m.measurement.candidate_id()] += !m.measurement.verified();
    for (const auto& [id, n] : unverified) EXPECT_LE(n, 1) << id << " measured twice";
    pairs += static_cast<int>(unverified.size());
  }
  EXPECT_EQ(pairs, 60);
}

TEST_F(ServeTest, SigtermDrainsAndTheJobResumesAfterRestart) {
  const std::map<std::string, std::string> env = {{"ANVIL_TEST_MEASURE_MS", "40"},
                                                  {"ANVIL_TEST_CANDIDATES", "40"}};
  ASSERT_TRUE(server_->Start({}, env));
  auto c = Client();
  std::string job_id;
  absl::Status stream_end;
  std::thread watcher([&] {
    stream_end = c->OptimizeKernel(Request({"128x128x128"}), [&](const v1::JobProgress& p) {
      job_id = p.job().id();
      return true;
    });
  });
  for (int i = 0; i < 500 && job_id.empty(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_FALSE(job_id.empty());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  server_->Kill(SIGTERM);
  double seconds = 0;
  EXPECT_EQ(server_->Wait(std::chrono::seconds(15), &seconds), 0) << server_->log(1);
  EXPECT_LT(seconds, 10.0);  // --server-drain-seconds 10
  watcher.join();
  EXPECT_EQ(stream_end.code(), absl::StatusCode::kUnavailable) << stream_end;
  // Checkpointed, not cancelled: the next server takes the job up again.
  ASSERT_TRUE(server_->Start({}, env));
  auto again = Client();
  v1::JobState end = v1::JOB_STATE_UNSPECIFIED;
  ASSERT_TRUE(again->WatchJob(job_id, [&](const v1::JobProgress& p) { end = p.job().state(); return true; }).ok());
  EXPECT_EQ(end, v1::JOB_STATE_SUCCEEDED);
}

}  // namespace
}  // namespace anvil
