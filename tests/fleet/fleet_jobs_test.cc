// End to end: a fleet's jobs through outages, cancels, drains and restarts
// (real anvil_test_server and anvil_test_worker processes,
// tests/fleet/fleet_fixture.h): a job waits for its GPU workers instead of
// failing, a job that can never run is refused, cancel reaches the tasks and
// ends the stream, a drain ends within seconds, a restarted server measures
// nothing twice, a worker registers again with a server that forgot it.
#include <chrono>

#include "tests/fleet/fleet_fixture.h"

namespace anvil::testing_fleet {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The server with production-like defaults for the model: no fleet.gpu, so
// the model is the GPU workers'.
class FleetJobsTest : public FleetTest {
 protected:
  bool StartServerWithoutModel(std::vector<std::string> extra = {}, std::map<std::string, std::string> env = {}) {
    std::vector<std::string> args = {"--fleet-enabled", "true", "--fleet-lease-seconds", "2",
                                     "--fleet-heartbeat-seconds", "0.3"};
    args.insert(args.end(), extra.begin(), extra.end());
    return server_->Start(args, env);
  }
};

// Every GPU worker gone mid-job (a node restart longer than the lease): the
// job waits, says so, and finishes once a worker is back. It used to fail
// at once with "no GPU worker in the fleet".
TEST_F(FleetJobsTest, AJobWaitsWhileNoGpuWorkerIsLive) {
  ASSERT_TRUE(StartServerWithoutModel({}, {{"ANVIL_TEST_CANDIDATES", "8"}}));
  WorkerProcess& gpu = AddWorker("gpu-a", {}, {{"ANVIL_TEST_MEASURE_MS", "100"}});
  ASSERT_TRUE(WaitForRows("SELECT count(*) FROM workers", 30));  // the fleet's model is known
  std::vector<std::string> said;
  const std::string job_id = StartJob(Request({"128x256x64", "256x256x64"}));
  ASSERT_FALSE(job_id.empty());
  std::thread follow([&] {
    (void)Client()->WatchJob(job_id, [&](const v1::JobProgress& p) {
      said.push_back(p.message());
      return true;
    });
  });
  EXPECT_TRUE(WaitForRows("SELECT count(*) FROM tasks WHERE kind = 'measure' AND state = 'done'", 60));
  gpu.KillAndReap();
  std::this_thread::sleep_for(std::chrono::seconds(5));  // over twice the lease
  absl::StatusOr<v1::Job> waiting = Client()->GetJob(job_id);
  EXPECT_TRUE(waiting.ok()) << waiting.status();
  if (waiting.ok()) {
    EXPECT_EQ(waiting->state(), v1::JOB_STATE_RUNNING) << waiting->error();
  }
  AddWorker("gpu-b", {}, {{"ANVIL_TEST_MEASURE_MS", "100"}});
  std::optional<v1::Job> done = WaitForState(job_id, v1::JOB_STATE_SUCCEEDED, 120);
  follow.join();
  ASSERT_TRUE(done.has_value()) << Client()->GetJob(job_id)->error();
  bool told = false;
  for (const std::string& m : said) told = told || m.find("waiting: no live GPU worker of model FAKE-GPU") != std::string::npos;
  EXPECT_TRUE(told) << "the job never said it was waiting";
  ExpectNothingLostOrDoubled();
}

// A server outage longer than the lease: at restart every worker reads dead,
// yet the resumed job goes on once they heartbeat again.
TEST_F(FleetJobsTest, AServerOutageLongerThanTheLeaseDoesNotFailTheResumedJob) {
  ASSERT_TRUE(StartServerWithoutModel({}, {{"ANVIL_TEST_CANDIDATES", "8"}}));
  AddWorker("gpu-a", {}, {{"ANVIL_TEST_MEASURE_MS", "100"}});
  ASSERT_TRUE(WaitForRows("SELECT count(*) FROM workers", 30));
  const std::string job_id = StartJob(Request({"128x256x64"}));
  ASSERT_TRUE(WaitForRows("SELECT count(*) FROM tasks WHERE kind = 'measure' AND state = 'done'", 60));
  server_->Kill(SIGKILL);
  server_->Wait(std::chrono::seconds(10));
  std::this_thread::sleep_for(std::chrono::seconds(5));  // the workers' last heartbeat is now past the lease
  server_->KeepPort();
  ASSERT_TRUE(StartServerWithoutModel({}, {{"ANVIL_TEST_CANDIDATES", "8"}}));
  std::optional<v1::Job> done = WaitForState(job_id, v1::JOB_STATE_SUCCEEDED, 120);
  ASSERT_TRUE(done.has_value()) << Client()->GetJob(job_id)->error();
  ExpectNothingLostOrDoubled();
}

// With only build workers, and no fleet.gpu, no job can ever be measured:
// refused up front instead of accepted, built once and failed.
TEST_F(FleetJobsTest, AJobNoGpuWorkerCouldEverMeasureIsRefused) {
  ASSERT_TRUE(StartServerWithoutModel());
  AddWorker("builder", {"--build-only", "--build-slots", "1"});
  ASSERT_TRUE(WaitForRows("SELECT count(*) FROM workers", 30));
  absl::Status st = Client()->OptimizeKernel(Request({"128x256x64"}), [](const v1::JobProgress&) { return true; });
  EXPECT_TRUE(absl::IsUnavailable(st)) << st;
  EXPECT_NE(st.message().find("no GPU worker has registered"), std::string::npos) << st;
  EXPECT_EQ(RawInt(db_, "SELECT count(*) FROM jobs"), 0);
}

// fleet.gpu names the model: a job sent before any such worker joined waits
// for the first (bounded by fleet.worker_wait_seconds, which fails it with
// the reason when nobody comes).
TEST_F(FleetJobsTest, AJobSentBeforeItsWorkersJoinedWaitsForThemWithinTheBound) {
  ASSERT_TRUE(StartServer());  // --fleet-gpu FAKE-GPU
  const std::string job_id = StartJob(Request({"128x256x64"}));
  std::this_thread::sleep_for(std::chrono::seconds(3));
  EXPECT_EQ(Client()->GetJob(job_id)->state(), v1::JOB_STATE_RUNNING);
  AddWorker("gpu-late");
  ASSERT_TRUE(WaitForState(job_id, v1::JOB_STATE_SUCCEEDED, 120).has_value()) << Client()->GetJob(job_id)->error();

  workers_.clear();  // killed
  server_->Kill(SIGTERM);
  ASSERT_EQ(server_->Wait(std::chrono::seconds(20)), 0);
  server_->KeepPort();
  ASSERT_TRUE(server_->Start({"--fleet-enabled", "true", "--fleet-lease-seconds", "1", "--fleet-heartbeat-seconds",
                              "0.3", "--fleet-gpu", "OTHER-GPU", "--fleet-worker-wait-seconds", "2"}));
  const std::string lonely = StartJob(Request({"256x256x64"}));
  std::optional<v1::Job> failed = WaitForState(lonely, v1::JOB_STATE_FAILED, 60);
  ASSERT_TRUE(failed.has_value());
  EXPECT_NE(failed->error().find("fleet.worker_wait_seconds"), std::string::npos) << failed->error();
}

// Cancel reaches the tasks: the leased one is abandoned by its worker at once
// (not finished), the queued ones never run, the stream ends with CANCELLED.
TEST_F(FleetJobsTest, CancelReachesLeasedAndQueuedTasksAndEndsTheStream) {
  ASSERT_TRUE(StartServer("2", {{"ANVIL_TEST_CANDIDATES", "10"}}));
  WorkerProcess& w = AddWorker("gpu-slow", {}, {{"ANVIL_TEST_MEASURE_MS", "20000"}});
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  v1::JobState last = v1::JOB_STATE_UNSPECIFIED;
  std::string job_id;
  std::thread stream([&] {
    absl::Status st = Client()->OptimizeKernel(Request({"128x256x64"}), [&](const v1::JobProgress& p) {
      job_id = p.job().id();
      last = p.job().state();
      return true;
    });
    EXPECT_TRUE(st.ok()) << st;
  });
  ASSERT_TRUE(WaitForRows("SELECT count(*) FROM tasks WHERE kind = 'measure' AND state = 'leased'", 60));
  const Clock::time_point cancelled = Clock::now();
  const std::string out = Shell(absl::StrCat(ANVIL_CLI, " --server ", server_->target(), " cancel ", job_id));
  EXPECT_NE(out.find("cancelled"), std::string::npos) << out;
  stream.join();
  EXPECT_LT(Since(cancelled), 5) << "the stream took too long to end";
  EXPECT_EQ(last, v1::JOB_STATE_CANCELLED) << "the stream's last event is not the final state";
  EXPECT_EQ(RawInt(db_, "SELECT count(*) FROM tasks WHERE state IN ('queued', 'leased')"), 0);
  EXPECT_GT(RawInt(db_, "SELECT count(*) FROM tasks WHERE state = 'cancelled'"), 0);
  // The worker dropped the 20 s measurement at its next heartbeat.
  for (int i = 0; i < 100 && w.log().find("abandoning it") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_NE(w.log().find("abandoning it at the next safe point"), std::string::npos) << w.log();
  EXPECT_LT(Since(cancelled), 10);
  EXPECT_EQ(RawInt(db_, "SELECT count(*) FROM measurements"), 0);
}

// SIGTERM while measurements are in flight on the workers: the server drains
// within seconds (not at its hard deadline), and the job resumes later.
TEST_F(FleetJobsTest, ADrainEndsWithinSecondsWithTasksInFlight) {
  ASSERT_TRUE(StartServer("2", {{"ANVIL_TEST_CANDIDATES", "6"}}));
  AddWorker("gpu-slow", {}, {{"ANVIL_TEST_MEASURE_MS", "20000"}});
  const std::string job_id = StartJob(Request({"128x256x64"}));
  ASSERT_TRUE(WaitForRows("SELECT count(*) FROM tasks WHERE kind = 'measure' AND state = 'leased'", 60));
  double seconds = 0;
  server_->Kill(SIGTERM);
  EXPECT_EQ(server_->Wait(std::chrono::seconds(20), &seconds), 0);
  EXPECT_LT(seconds, 5) << "the drain ran to its deadline (server.drain_seconds 10)";
  EXPECT_EQ(RawText(db_, absl::StrCat("SELECT state FROM jobs WHERE id = '", job_id, "'")), "running")
      << "the drained job must resume in the next process";
}

// The server SIGKILLed while a measurement is leased, and down for longer
// than the lease: the restarted server gives the worker a lease to come back
// (nobody could renew meanwhile), the worker reports, and the resumed job
// takes the task over instead of measuring it again. Nothing is held against
// the worker for the outage.
TEST_F(FleetJobsTest, AServerRestartedMidTaskTakesTheTaskOver) {
  ASSERT_TRUE(StartServer("3", {{"ANVIL_TEST_CANDIDATES", "4"}}));
  AddWorker("gpu-a", {}, {{"ANVIL_TEST_MEASURE_MS", "4000"}, {"ANVIL_TEST_BUILD_MS", "1000"}});
  const std::string job_id = StartJob(Request({"128x256x64"}));
  ASSERT_TRUE(WaitForRows("SELECT count(*) FROM tasks WHERE kind = 'measure' AND state = 'leased'", 60));
  const std::string held = RawText(db_, "SELECT id FROM tasks WHERE kind = 'measure' AND state = 'leased'");
  server_->Kill(SIGKILL);
  server_->Wait(std::chrono::seconds(10));
  std::this_thread::sleep_for(std::chrono::seconds(5));  // past the lease
  server_->KeepPort();
  ASSERT_TRUE(StartServer("3", {{"ANVIL_TEST_CANDIDATES", "4"}}));
  ASSERT_TRUE(WaitForState(job_id, v1::JOB_STATE_SUCCEEDED, 120).has_value()) << Client()->GetJob(job_id)->error();
  EXPECT_EQ(RawInt(db_, absl::StrCat("SELECT attempt FROM tasks WHERE id = '", held, "'")), 1)
      << "the task in flight was measured again";
  EXPECT_EQ(RawInt(db_, "SELECT coalesce(sum(expired_leases), 0) FROM tasks"), 0);
  EXPECT_EQ(RawInt(db_, "SELECT count(*) FROM worker_evidence"), 0);
  ExpectNothingLostOrDoubled();
}

// A server that lost its store (restarted on an empty one at the same
// address) answers the workers "unknown worker": they register again and
// serve its jobs.
TEST_F(FleetJobsTest, AWorkerRegistersAgainWithAServerThatForgotIt) {
  ASSERT_TRUE(StartServer());
  WorkerProcess& w = AddWorker("gpu-a");
  ASSERT_TRUE(WaitForRows("SELECT count(*) FROM workers", 30));
  // The worker has its answer too: on a loaded machine its registration can
  // reach the store and lose the reply, and its retry would then register
  // with the new server afresh, with nothing to register again for.
  for (int i = 0; i < 300 && w.log().find("registered as") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_NE(w.log().find("registered as"), std::string::npos) << w.log();
  server_->Kill(SIGKILL);
  server_->Wait(std::chrono::seconds(10));
  std::filesystem::remove(db_);
  std::filesystem::remove(db_ + "-wal");
  std::filesystem::remove(db_ + "-shm");
  server_->KeepPort();
  ASSERT_TRUE(StartServer());
  v1::Job job = RunJob(Request({"128x256x64"}), [] {}, 60);
  EXPECT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.error();
  EXPECT_NE(w.log().find("registering again"), std::string::npos) << w.log();
}

// A worker killed while its Lease call waits for work: the task that comes
// next goes to a live worker, not to the dead caller (whose lease would then
// have to expire first: an expired lease, and the job that much longer).
TEST_F(FleetJobsTest, NoTaskIsLeasedToAWorkerThatDiedWaiting) {
  ASSERT_TRUE(StartServer("6"));
  WorkerProcess& dead = AddWorker("gpu-dead", {"--lease-wait", "30"});
  ASSERT_TRUE(WaitForRows("SELECT count(*) FROM workers WHERE hostname = 'gpu-dead'", 30));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // its Lease calls are waiting
  dead.KillAndReap();
  AddWorker("gpu-live", {"--lease-wait", "1"});
  const Clock::time_point start = Clock::now();
  v1::Job job = RunJob(Request({"128x256x64"}), [] {}, 60);
  EXPECT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.error();
  // The re-check avoids the live worker's GPU while the dead one still counts
  // as live (one lease); nothing else waits.
  EXPECT_LT(Since(start), 15);
  EXPECT_EQ(RawInt(db_, "SELECT count(*) FROM tasks t JOIN workers w ON t.result_worker = w.id "
                        "WHERE w.hostname = 'gpu-dead'"),
            0);
  EXPECT_EQ(RawInt(db_, "SELECT coalesce(sum(expired_leases), 0) FROM tasks"), 0);
}

}  // namespace
}  // namespace anvil::testing_fleet
