// End to end: the fleet's jobs run on real anvil_test_worker processes
// (tests/fleet/fleet_fixture.h); workers are killed, paused and refused, the
// server killed, and the store's tasks and measurements are checked against
// what the jobs issued.
#include "tests/fleet/fleet_fixture.h"

namespace anvil::testing_fleet {
namespace {

TEST_F(FleetTest, AJobCompletesWithThreeWorkers) {
  ASSERT_TRUE(StartServer());
  AddWorker("gpu-a");
  AddWorker("gpu-b");
  AddWorker("gpu-c");
  v1::Job job = RunJob(Request({"128x256x64", "2048x512x512"}), [] {});
  EXPECT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.error();
  EXPECT_GT(RawInt(db_, "SELECT count(*) FROM tasks WHERE kind = 'measure' AND state = 'done'"), 0);
  EXPECT_GE(RawInt(db_, "SELECT count(DISTINCT result_worker) FROM tasks WHERE state = 'done'"), 2)
      << "the work was not spread over the workers";
  EXPECT_GT(RawInt(db_, "SELECT count(*) FROM measurements"), 0);
  ExpectNothingLostOrDoubled();
}

// One worker with two GPU slots: the job sends as many measurements at once as
// the fleet has slots of its model, so both slots measure at the same time
// (before, each measure task was queued only once the previous one was done).
TEST_F(FleetTest, TwoGpuSlotsMeasureAtTheSameTime) {
  ASSERT_TRUE(StartServer());
  AddWorker("gpu-two", {}, {{"ANVIL_TEST_GPUS", "2"}, {"ANVIL_TEST_MEASURE_MS", "200"}});
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // registered before the job asks
  v1::Job job = RunJob(Request({"128x256x64", "2048x512x512"}), [] {});
  EXPECT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.error();
  for (int slot : {0, 1}) {
    EXPECT_GT(RawInt(db_, absl::StrCat("SELECT count(*) FROM tasks WHERE kind = 'measure' AND state = 'done' "
                                       "AND lease_slot = ", slot)),
              0)
        << "slot " << slot << " measured nothing";
  }
  // Pairs of measure tasks on different slots whose lives (queued to done) overlap.
  EXPECT_GT(RawInt(db_, "SELECT count(*) FROM tasks a JOIN tasks b ON a.id < b.id "
                        "WHERE a.kind = 'measure' AND b.kind = 'measure' AND a.lease_slot != b.lease_slot "
                        "AND a.created_at < b.updated_at AND b.created_at < a.updated_at"),
            0)
      << "the two slots never measured at the same time";
  ExpectNothingLostOrDoubled();
}

TEST_F(FleetTest, BuildOnlyWorkersFeedGpuWorkers) {
  ASSERT_TRUE(StartServer());
  WorkerProcess& builder = AddWorker("builder", {"--build-only", "--build-slots", "2"});
  (void)builder;
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // registered before the GPU worker leases
  AddWorker("gpu-a", {"--build-slots", "0"});
  v1::Job job = RunJob(Request({"128x256x64"}), [] {});
  EXPECT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.error();
  EXPECT_GT(RawInt(db_, "SELECT count(*) FROM tasks WHERE kind = 'build'"), 0);
  EXPECT_EQ(RawInt(db_, "SELECT count(*) FROM tasks WHERE kind = 'build' AND result_worker NOT LIKE 'builder-%'"), 0)
      << "a GPU worker built while a build-only worker was alive";
  EXPECT_EQ(RawInt(db_, "SELECT count(*) FROM tasks WHERE kind = 'measure' AND result_worker NOT LIKE 'gpu-a-%'"), 0);
  EXPECT_GT(RawInt(db_, "SELECT builds FROM workers WHERE hostname = 'builder'"), 0);
  EXPECT_GT(RawInt(db_, "SELECT measures FROM workers WHERE hostname = 'gpu-a'"), 0);
  ExpectNothingLostOrDoubled();
}

// A GPU node builds on its own build slots (by default one per two cores) while
// its GPU slot only measures; with --build-slots 0 and no other builder in the
// fleet, its GPU slot builds.
TEST_F(FleetTest, AGpuWorkerBuildsOnItsBuildSlotsWhileItsGpuMeasures) {
  ASSERT_TRUE(StartServer());
  AddWorker("gpu-node", {"--build-slots", "3"}, {{"ANVIL_TEST_BUILD_MS", "100"}});
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // registered before the job asks
  v1::Job job = RunJob(Request({"128x256x64"}), [] {});
  EXPECT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.error();
  EXPECT_EQ(RawInt(db_, "SELECT build_jobs FROM workers WHERE hostname = 'gpu-node'"), 3);
  EXPECT_EQ(RawInt(db_, "SELECT count(*) FROM tasks WHERE kind = 'build' AND lease_slot >= 0"), 0)
      << "the GPU slot built while the node had build slots";
  EXPECT_GE(RawInt(db_, "SELECT count(DISTINCT lease_slot) FROM tasks WHERE kind = 'build'"), 2)
      << "the build slots did not share the builds";
  EXPECT_EQ(RawInt(db_, "SELECT count(*) FROM tasks WHERE kind = 'build' AND lease_slot NOT IN (-1, -2, -3)"), 0);
  EXPECT_EQ(RawInt(db_, "SELECT count(*) FROM tasks WHERE kind = 'measure' AND lease_slot != 0"), 0);
  const std::string listed = Shell(absl::StrCat(ANVIL_CLI, " --server ", server_->target(), " workers"));
  EXPECT_NE(listed.find("build slots"), std::string::npos) << listed;
  ExpectNothingLostOrDoubled();
}

TEST_F(FleetTest, WithoutBuildSlotsInTheFleetTheGpuSlotBuilds) {
  ASSERT_TRUE(StartServer());
  AddWorker("gpu-only", {"--build-slots", "0"});
  v1::Job job = RunJob(Request({"128x256x64"}), [] {});
  EXPECT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.error();
  EXPECT_GT(RawInt(db_, "SELECT count(*) FROM tasks WHERE kind = 'build' AND state = 'done' AND lease_slot = 0"), 0);
  EXPECT_EQ(RawInt(db_, "SELECT count(*) FROM tasks WHERE kind = 'build' AND lease_slot != 0"), 0);
  ExpectNothingLostOrDoubled();
}

// A build-only worker without a build slot is a usage error.
TEST_F(FleetTest, ABuildOnlyWorkerWithoutBuildSlotsIsRefused) {
  ASSERT_TRUE(StartServer());
  WorkerProcess& w = AddWorker("nothing", {"--build-only", "--build-slots", "0"});
  EXPECT_EQ(w.Wait(10), 2) << w.log();
  EXPECT_NE(w.log().find("at least one build slot"), std::string::npos) << w.log();
}

// Workers are SIGKILLed while they hold a measure lease (the one holding it
// is chosen from the store), so each kill loses a lease; every lost lease
// goes to another worker and nothing is lost or measured twice. At least ten
// leases are lost per run.
TEST_F(FleetTest, KilledWorkersTasksAreLeasedAgainNothingLostOrDoubled) {
  const int target = SoakKnob("ANVIL_FLEET_SOAK_KILLS", 12);
  ASSERT_TRUE(StartServer("1", {{"ANVIL_TEST_CANDIDATES", absl::StrCat(std::max(12, target))}}));
  std::map<std::string, std::string> slow = {{"ANVIL_TEST_MEASURE_MS", "300"}};
  for (int i = 0; i < 3; ++i) AddWorker(absl::StrCat("gpu-", i), {}, slow);
  int kills = 0;
  std::set<std::string> killed;  // tasks whose holder was killed: each task loses one lease at most
  v1::OptimizeKernelRequest r = Request({"128x256x64", "256x256x64"});
  v1::Job job = RunJob(
      r,
      [&] {
        if (kills >= target) return;
        // A worker process now alive that holds a measure lease (its id is
        // the newest of its host name: a restarted worker has new GPU UUIDs).
        const std::string row = RawText(
            db_, "SELECT t.id || ' ' || w.hostname FROM tasks t JOIN workers w ON t.lease_owner = w.id "
                 "WHERE t.state = 'leased' AND t.kind = 'measure' AND w.id = (SELECT id FROM workers v "
                 "WHERE v.hostname = w.hostname ORDER BY registered_at DESC LIMIT 1) LIMIT 1");
        const std::string task = row.substr(0, row.find(' '));
        const std::string holder = row.substr(row.find(' ') + 1);
        if (holder.rfind("gpu-", 0) != 0 || !killed.insert(task).second) return;
        const size_t victim = static_cast<size_t>(std::stoi(holder.substr(4)));
        workers_[victim]->KillAndReap();
        ++kills;
        workers_[victim]->Start(server_->target(), {}, slow);
      },
      240 + 2 * target);
  EXPECT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.error();
  const int64_t lost = RawInt(db_, "SELECT sum(expired_leases) FROM tasks");
  std::printf("worker kills %d; measure tasks %lld, done %lld; leases lost and leased again %lld; "
              "measurements stored %lld\n",
              kills, static_cast<long long>(RawInt(db_, "SELECT count(*) FROM tasks WHERE kind = 'measure'")),
              static_cast<long long>(RawInt(db_, "SELECT count(*) FROM tasks WHERE kind = 'measure' AND state = 'done'")),
              static_cast<long long>(lost), static_cast<long long>(RawInt(db_, "SELECT count(*) FROM measurements")));
  // Each task's holder dies once at most, while the job lasts: a soak's long
  // job gets most of its kills, the default's all twelve.
  EXPECT_GE(kills, std::min(10, target));
  EXPECT_GE(lost, std::min(10, target)) << "too few leases were lost to prove anything";
  ExpectNothingLostOrDoubled();
}

// The server is SIGKILLed while a measurement is leased and restarted on the
// same store and port: every acknowledged result survives, the resumed job
// takes its earlier run's tasks over, and no GPU work is done twice.
TEST_F(FleetTest, ServerKilledWhileResultsStreamKeepsEveryAcknowledgedResult) {
  const int target = SoakKnob("ANVIL_FLEET_SOAK_SERVER_KILLS", 3);
  const std::string candidates = absl::StrCat(std::max(30, 30 * target));
  ASSERT_TRUE(StartServer("2", {{"ANVIL_TEST_CANDIDATES", candidates}}));
  AddWorker("gpu-a", {}, {{"ANVIL_TEST_MEASURE_MS", "100"}});
  AddWorker("gpu-b", {}, {{"ANVIL_TEST_MEASURE_MS", "100"}});
  int polls = 0, server_kills = 0;
  int64_t done_before = 0;
  v1::Job job = RunJob(Request({"128x256x64", "512x512x64"}), [&] {
    if (++polls % 8 != 0 || server_kills >= target) return;
    if (RawInt(db_, "SELECT count(*) FROM tasks WHERE kind = 'measure' AND state = 'leased'") == 0) return;
    server_->Kill(SIGKILL);
    server_->Wait(std::chrono::seconds(10));
    ++server_kills;
    done_before = RawInt(db_, "SELECT count(*) FROM tasks WHERE state = 'done'");
    EXPECT_EQ(RawText(db_, "PRAGMA integrity_check"), "ok");
    server_->KeepPort();  // the workers reconnect to the same port
    ASSERT_TRUE(StartServer("2", {{"ANVIL_TEST_CANDIDATES", candidates}}));
    EXPECT_GE(RawInt(db_, "SELECT count(*) FROM tasks WHERE state = 'done'"), done_before)
        << "an acknowledged result was lost by the restart";
  }, 240 + 10 * target);
  EXPECT_EQ(server_kills, target);
  EXPECT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.error();
  std::printf("server kills %d; measure tasks %lld, done %lld, cancelled %lld; measurements stored %lld; "
              "candidates measured twice %lld\n", server_kills,
              static_cast<long long>(RawInt(db_, "SELECT count(*) FROM tasks WHERE kind = 'measure'")),
              static_cast<long long>(RawInt(db_, "SELECT count(*) FROM tasks WHERE kind = 'measure' AND state = 'done'")),
              static_cast<long long>(RawInt(db_, "SELECT count(*) FROM tasks WHERE state = 'cancelled'")),
              static_cast<long long>(RawInt(db_, "SELECT count(*) FROM measurements")),
              static_cast<long long>(RawInt(db_, "SELECT count(*) FROM (SELECT candidate_id, count(*) c FROM tasks "
                                                 "WHERE kind = 'measure' AND state = 'done' AND length(id) = 22 "
                                                 "GROUP BY candidate_id HAVING c > 1)")));
  ExpectNothingLostOrDoubled();
}

TEST_F(FleetTest, PausedWorkerPastItsLeaseHasItsLateResultRefused) {
  ASSERT_TRUE(StartServer("1"));
  WorkerProcess& paused = AddWorker("paused", {}, {{"ANVIL_TEST_MEASURE_MS", "400"}});
  AddWorker("gpu-b", {}, {{"ANVIL_TEST_MEASURE_MS", "400"}});
  // Paused while it holds a measure lease (a network cut: no heartbeat, no
  // report), resumed once the server has expired that lease. Driven by the
  // store's state, not by time: a loaded machine polls slowly.
  std::string held;  // the task the paused worker held
  bool resumed = false;
  auto resume_once_expired = [&] {
    if (held.empty() || resumed) return;
    if (RawInt(db_, absl::StrCat("SELECT expired_leases FROM tasks WHERE id = '", held, "'")) == 0) return;
    paused.Signal(SIGCONT);
    resumed = true;
  };
  v1::Job job = RunJob(Request({"128x256x64"}), [&] {
    if (held.empty()) {
      held = RawText(db_, "SELECT t.id FROM tasks t JOIN workers w ON t.lease_owner = w.id "
                          "WHERE w.hostname = 'paused' AND t.state = 'leased' AND t.kind = 'measure' LIMIT 1");
      if (!held.empty()) paused.Signal(SIGSTOP);
    }
    resume_once_expired();
  });
  EXPECT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.error();
  ASSERT_FALSE(held.empty()) << "the paused worker never held a measure lease";
  for (int i = 0; i < 100 && !resumed; ++i) {  // the job may end first
    resume_once_expired();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(resumed) << "the server never expired the paused worker's lease";
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // its late report arrives
  EXPECT_GT(RawInt(db_, "SELECT sum(expired_leases) FROM tasks"), 0);
  ExpectNothingLostOrDoubled();
}

// Worker and server over TLS (a self-signed certificate the worker is given
// as its roots); a worker that speaks plaintext to that port gets nowhere.
TEST_F(FleetTest, WorkerOverTls) {
  if (std::system("openssl version > /dev/null 2>&1") != 0) GTEST_SKIP() << "no openssl command here";
  const std::string cert = dir_ + "/cert.pem", key = dir_ + "/key.pem";
  ASSERT_EQ(std::system(absl::StrCat("openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost "
                                     "-addext subjectAltName=IP:127.0.0.1,DNS:localhost -keyout ", key,
                                     " -out ", cert, " > /dev/null 2>&1").c_str()),
            0);
  ASSERT_TRUE(server_->Start({"--fleet-enabled", "true", "--fleet-lease-seconds", "2",
                              "--fleet-heartbeat-seconds", "0.3", "--fleet-gpu", "FAKE-GPU",
                              "--tls-cert-file", cert, "--tls-key-file", key}));
  WorkerProcess& plain = AddWorker("gpu-plain");
  AddWorker("gpu-tls", {"--tls-ca", cert});
  ClientOptions o;
  o.target = server_->target();
  o.ca_file = cert;
  o.tls = true;
  std::string job_id;
  auto c = *KernelSearchClient::Connect(o);
  absl::Status st = c->OptimizeKernel(Request({"128x256x64"}), [&](const v1::JobProgress& p) {
    job_id = p.job().id();
    return true;
  });
  ASSERT_TRUE(st.ok()) << st;
  absl::StatusOr<v1::Job> job = c->GetJob(job_id);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->state(), v1::JOB_STATE_SUCCEEDED) << job->error();
  EXPECT_EQ(RawInt(db_, "SELECT count(*) FROM tasks WHERE result_worker NOT LIKE 'gpu-tls-%'"), 0);
  EXPECT_EQ(RawInt(db_, "SELECT count(*) FROM workers WHERE hostname = 'gpu-plain'"), 0);
  EXPECT_EQ(plain.Wait(0), -1) << "the plaintext worker should still be retrying, not registered";
  EXPECT_NE(plain.log().find("start this worker with --tls-ca FILE or --tls"), std::string::npos) << plain.log();
}

TEST_F(FleetTest, WorkerWithTheWrongTokenIsRefused) {
  ASSERT_TRUE(server_->Start({"--fleet-enabled", "true"}, {{"ANVIL_AUTH_TOKEN", "right-token"}}));
  WorkerProcess& w = AddWorker("intruder", {}, {{"ANVIL_AUTH_TOKEN", "wrong-token"}});
  EXPECT_EQ(w.Wait(30), 3);
  EXPECT_NE(w.log().find("bearer token"), std::string::npos) << w.log();
  EXPECT_EQ(RawInt(db_, "SELECT count(*) FROM workers"), 0);
  WorkerProcess& ok = AddWorker("member", {}, {{"ANVIL_AUTH_TOKEN", "right-token"}});
  std::this_thread::sleep_for(std::chrono::seconds(1));
  EXPECT_EQ(ok.Wait(0.1), -1) << ok.log();
  EXPECT_EQ(RawInt(db_, "SELECT count(*) FROM workers"), 1);
}

TEST_F(FleetTest, WorkerWhoseRunsKeepFailingIsQuarantined) {
  ASSERT_TRUE(server_->Start({"--fleet-enabled", "true", "--fleet-quarantine-after", "2",
                              "--fleet-gpu", "FAKE-GPU"}));
  AddWorker("sick", {}, {{"ANVIL_TEST_INFRA_FAIL", "1"}});
  std::thread job([this] {
    auto c = Client();
    (void)c->OptimizeKernel(Request({"128x256x64"}), [](const v1::JobProgress&) { return true; });
  });
  for (int i = 0; i < 300 && RawInt(db_, "SELECT count(*) FROM workers WHERE quarantine_reason != ''") == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  // The reason names the evidence: failures of its own leases, the last one's task and error.
  const std::string reason = RawText(db_, "SELECT quarantine_reason FROM workers WHERE hostname = 'sick'");
  EXPECT_NE(reason.find("2 failures of its own leases in a row"), std::string::npos) << reason;
  EXPECT_NE(reason.find("test: cudaErrorNoDevice before the candidate ran"), std::string::npos) << reason;
  EXPECT_EQ(RawInt(db_, "SELECT count(*) FROM worker_evidence w JOIN workers k ON k.id = w.worker_id "
                        "WHERE k.hostname = 'sick' AND w.kind = 'infrastructure'"),
            2);
  EXPECT_EQ(RawText(db_, "SELECT state FROM workers WHERE hostname = 'sick'"), "quarantined");
  // The operator sees it (`anvil workers`)...
  const std::string remote = absl::StrCat(ANVIL_CLI, " --server ", server_->target(), " workers");
  const std::string listed = Shell(remote);
  EXPECT_NE(listed.find("quarantined"), std::string::npos) << listed;
  EXPECT_NE(listed.find("test: cudaErrorNoDevice before the candidate ran"), std::string::npos) << listed;
  // A healthy worker finishes the job.
  AddWorker("healthy");
  job.join();
  ExpectNothingLostOrDoubled();
  // ... and lifts the quarantine: the worker's record is clean again.
  const std::string id = RawText(db_, "SELECT id FROM workers WHERE hostname = 'sick'");
  const std::string cleared = Shell(absl::StrCat(remote, " --clear-quarantine ", id));
  EXPECT_NE(cleared.find("quarantine lifted: " + id), std::string::npos) << cleared;
  EXPECT_EQ(RawText(db_, "SELECT quarantine_reason FROM workers WHERE hostname = 'sick'"), "");
  EXPECT_EQ(RawInt(db_, "SELECT infra_failures FROM workers WHERE hostname = 'sick'"), 0);
  const std::string again = Shell(absl::StrCat(remote, " --clear-quarantine ", id));
  EXPECT_NE(again.find("not quarantined, nothing to lift: " + id), std::string::npos) << again;
  const std::string unknown = Shell(absl::StrCat(remote, " --clear-quarantine no-such-worker"));
  EXPECT_NE(unknown.find("no worker no-such-worker"), std::string::npos) << unknown;
}

// A GPU worker whose sandboxed runs could not read its artifacts stops before
// registering (exit 4, the fix in its log) instead of failing every task.
TEST_F(FleetTest, GpuWorkerWithAnUnreachableCacheDirectoryStopsAtStart) {
  ASSERT_TRUE(StartServer());
  WorkerProcess& w = AddWorker("gpu-unreachable", {}, {{"ANVIL_TEST_CACHE_UNREACHABLE", "1"}});
  EXPECT_EQ(w.Wait(30), 4) << w.log();
  EXPECT_NE(w.log().find("cannot read --cache-dir"), std::string::npos) << w.log();
  EXPECT_EQ(RawInt(db_, "SELECT count(*) FROM workers"), 0);
}

TEST_F(FleetTest, ProblemOnAGpuNoWorkerHasIsUnavailable) {
  ASSERT_TRUE(server_->Start({"--fleet-enabled", "true"}));
  AddWorker("gpu-a");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  v1::OptimizeKernelRequest r = Request({"128x256x64"});
  r.mutable_problems(0)->set_gpu("B200");
  auto c = Client();
  absl::Status st = c->OptimizeKernel(r, [](const v1::JobProgress&) { return true; });
  EXPECT_TRUE(absl::IsUnavailable(st)) << st;
}

}  // namespace
}  // namespace anvil::testing_fleet
