// End to end: identities and trust in a fleet (real anvil_test_server and
// anvil_test_worker processes, and raw Fleet stubs playing a hostile
// worker): per-worker credentials, reports only for one's own leases,
// quarantine only on evidence the server checked, malformed results refused
// without failing the job, a lying worker's figures never stored as a best,
// bad Lease arguments, a node that cannot isolate.
#include <grpcpp/grpcpp.h>

#include <cmath>
#include <limits>

#include "anvil/v1/fleet.grpc.pb.h"
#include "tests/fleet/fleet_fixture.h"

namespace anvil::testing_fleet {
namespace {

// A worker spoken by hand over the Fleet service.
struct RawWorker {
  std::unique_ptr<v1::Fleet::Stub> stub;
  std::string id, credential;

  std::unique_ptr<grpc::ClientContext> Context(const std::string& secret) const {
    auto c = std::make_unique<grpc::ClientContext>();
    if (!secret.empty()) c->AddMetadata("authorization", absl::StrCat("Bearer ", secret));
    c->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    return c;
  }
};

RawWorker Register(const std::string& target, const std::string& host, const std::string& token = "") {
  RawWorker w;
  w.stub = v1::Fleet::NewStub(grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  v1::RegisterWorkerRequest r;
  r.set_hostname(host);
  v1::GpuInfo* g = r.add_gpus();
  g->set_ordinal(0);
  g->set_uuid(absl::StrCat("GPU-", host));
  g->set_model("FAKE-GPU");
  g->set_arch("sm_90a");
  v1::RegisterWorkerResponse out;
  grpc::Status s = w.stub->RegisterWorker(w.Context(token).get(), r, &out);
  EXPECT_TRUE(s.ok()) << s.error_message();
  w.id = out.worker_id();
  w.credential = out.credential();
  return w;
}

class FleetTrustTest : public FleetTest {};

// Every worker call carries the worker's own credential: another's, an old
// one or none is refused, so no worker can lease, report or fail tasks as
// another; the enrolment token alone registers.
TEST_F(FleetTrustTest, AWorkerActsOnlyAsItselfWithItsOwnCredential) {
  ASSERT_TRUE(server_->Start({"--fleet-enabled", "true", "--fleet-gpu", "FAKE-GPU", "--fleet-quarantine-after", "1"},
                             {{"ANVIL_AUTH_TOKEN", "enrol-me"}}));
  RawWorker honest = Register(server_->target(), "honest", "enrol-me");
  RawWorker mallory = Register(server_->target(), "mallory", "enrol-me");
  ASSERT_FALSE(honest.credential.empty());
  ASSERT_NE(honest.credential, mallory.credential);
  // Work for the honest worker to hold.
  std::thread job([this] {
    auto c = Client("enrol-me");
    (void)c->OptimizeKernel(Request({"128x256x64"}), [](const v1::JobProgress&) { return false; });
  });
  job.join();
  v1::LeaseRequest lr;
  lr.set_worker_id(honest.id);
  lr.set_gpu_ordinal(-1);
  lr.set_wait_s(10);
  v1::LeaseResponse lease;
  ASSERT_TRUE(honest.stub->Lease(honest.Context(honest.credential).get(), lr, &lease).ok());
  ASSERT_TRUE(lease.has_task());
  // Mallory names the honest worker: with her credential, the shared token, or nothing.
  v1::ReportResultRequest forged;
  forged.set_worker_id(honest.id);
  forged.set_task_id(lease.task().task_id());
  forged.set_attempt(lease.task().attempt());
  forged.set_infrastructure_error("forged: the GPU fell off the bus");
  for (const std::string& secret : {mallory.credential, std::string("enrol-me"), std::string()}) {
    v1::ReportResultResponse resp;
    grpc::Status s = mallory.stub->ReportResult(mallory.Context(secret).get(), forged, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << secret << ": " << s.error_message();
    v1::LeaseRequest steal = lr;
    v1::LeaseResponse none;
    EXPECT_EQ(mallory.stub->Lease(mallory.Context(secret).get(), steal, &none).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  // As herself, for a lease she does not hold: refused, nothing recorded against anyone.
  forged.set_worker_id(mallory.id);
  v1::ReportResultResponse resp;
  ASSERT_TRUE(mallory.stub->ReportResult(mallory.Context(mallory.credential).get(), forged, &resp).ok());
  EXPECT_FALSE(resp.accepted());
  EXPECT_EQ(RawInt(db_, "SELECT count(*) FROM workers WHERE quarantine_reason != ''"), 0);
  EXPECT_EQ(RawInt(db_, "SELECT count(*) FROM worker_evidence"), 0);
  // Registering again issues a new credential; the old one stops working.
  RawWorker again = Register(server_->target(), "honest", "enrol-me");
  EXPECT_EQ(again.id, honest.id);
  v1::HeartbeatRequest hb;
  hb.set_worker_id(honest.id);
  v1::HeartbeatResponse hr;
  EXPECT_EQ(honest.stub->Heartbeat(honest.Context(honest.credential).get(), hb, &hr).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(again.stub->Heartbeat(again.Context(again.credential).get(), hb, &hr).ok());
  // Operators' calls need the API token, not a worker's credential.
  v1::ListWorkersResponse listed;
  EXPECT_EQ(again.stub->ListWorkers(again.Context(again.credential).get(), {}, &listed).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(again.stub->ListWorkers(again.Context("enrol-me").get(), {}, &listed).ok());
}

// A worker whose results are malformed (a measurement missing) is refused,
// its tasks go to a healthy worker, the job succeeds, and the refusals are
// evidence that quarantines it. One malformed result used to fail the job.
TEST_F(FleetTrustTest, MalformedResultsAreRefusedAndTheJobGoesOn) {
  ASSERT_TRUE(server_->Start({"--fleet-enabled", "true", "--fleet-gpu", "FAKE-GPU", "--fleet-quarantine-after", "2",
                              "--fleet-lease-seconds", "2", "--fleet-heartbeat-seconds", "0.3"}));
  AddWorker("broken", {}, {{"ANVIL_TEST_MALFORMED", "1"}});
  ASSERT_TRUE(WaitForRows("SELECT count(*) FROM workers", 30));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const std::string job_id = StartJob(Request({"128x256x64"}));
  ASSERT_TRUE(WaitForRows("SELECT count(*) FROM workers WHERE quarantine_reason != ''", 60));
  AddWorker("healthy");
  std::optional<v1::Job> done = WaitForState(job_id, v1::JOB_STATE_SUCCEEDED, 120);
  ASSERT_TRUE(done.has_value()) << Client()->GetJob(job_id)->error();
  EXPECT_GE(RawInt(db_, "SELECT count(*) FROM worker_evidence e JOIN workers w ON w.id = e.worker_id "
                        "WHERE w.hostname = 'broken' AND e.kind = 'malformed_report'"),
            2);
  const std::string reason = RawText(db_, "SELECT quarantine_reason FROM workers WHERE hostname = 'broken'");
  EXPECT_NE(reason.find("0 measurements for 1 problems"), std::string::npos) << reason;
  EXPECT_EQ(RawInt(db_, "SELECT count(*) FROM measurements m JOIN workers w ON w.id = m.worker "
                        "WHERE w.hostname = 'broken'"),
            0);
  ExpectNothingLostOrDoubled();
}

// One worker reports every figure 20x too fast. Its candidates look best, so
// they are re-checked (three times each, as the embedded search does), on
// the honest workers' GPUs: a re-check verifies only where two GPUs agree,
// so the stored bests are honest figures, the liar never verifies anything,
// and every disagreement is on record against it (`anvil workers` shows the
// count).
TEST_F(FleetTrustTest, ALyingWorkerNeverSetsAStoredBestAndIsFlagged) {
  ASSERT_TRUE(server_->Start({"--fleet-enabled", "true", "--fleet-gpu", "FAKE-GPU", "--fleet-lease-seconds", "3",
                              "--fleet-heartbeat-seconds", "0.3", "--fleet-quarantine-after", "2"},
                             {{"ANVIL_TEST_CANDIDATES", "6"}, {"ANVIL_TEST_RECHECKS", "3"}}));
  const std::map<std::string, std::string> pace = {{"ANVIL_TEST_MEASURE_MS", "60"}};
  std::map<std::string, std::string> liar = pace;
  liar["ANVIL_TEST_LIE"] = "20";
  AddWorker("liar", {}, liar);
  AddWorker("honest-a", {}, pace);
  AddWorker("honest-b", {}, pace);
  ASSERT_TRUE(WaitForRows("SELECT count(*) FROM workers WHERE hostname = 'honest-b'", 30));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  v1::Job job = RunJob(Request({"128x256x64", "256x256x64", "512x256x64", "1024x256x64"}), [] {});
  EXPECT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.error();
  ASSERT_GT(RawInt(db_, "SELECT count(*) FROM measurements m JOIN workers w ON w.id = m.worker "
                        "WHERE w.hostname = 'liar' AND NOT m.verified"),
            0)
      << "the liar measured nothing: the test proves nothing";
  EXPECT_EQ(RawInt(db_, "SELECT count(*) FROM measurements m JOIN workers w ON w.id = m.worker "
                        "WHERE w.hostname = 'liar' AND m.verified"),
            0)
      << "a figure of the liar alone became a stored best";
  // Every verified figure is an honest one: the fake's time is US + M/1000 us >= 4 us.
  EXPECT_EQ(RawInt(db_, "SELECT count(*) FROM measurements WHERE verified AND graph_cold_median_us < 1"), 0);
  EXPECT_GT(RawInt(db_, "SELECT count(*) FROM measurements WHERE verified"), 0);
  EXPECT_GT(RawInt(db_, "SELECT count(*) FROM worker_evidence e JOIN workers w ON w.id = e.worker_id "
                        "WHERE w.hostname = 'liar' AND e.kind = 'disagreement'"),
            0);
  const std::string listed = Shell(absl::StrCat(ANVIL_CLI, " --server ", server_->target(), " workers"));
  EXPECT_NE(listed.find("disagree"), std::string::npos) << listed;
}

// Lease's wait must be a number of seconds from 0 to 60: NaN once held a
// server thread for good.
TEST_F(FleetTrustTest, ALeaseWaitThatIsNotANumberIsRefusedAtOnce) {
  ASSERT_TRUE(StartServer());
  RawWorker w = Register(server_->target(), "odd");
  for (double wait : {std::nan(""), std::numeric_limits<double>::infinity(), -1.0, 1e9}) {
    v1::LeaseRequest lr;
    lr.set_worker_id(w.id);
    lr.set_gpu_ordinal(0);
    lr.set_wait_s(wait);
    v1::LeaseResponse out;
    const auto start = std::chrono::steady_clock::now();
    grpc::Status s = w.stub->Lease(w.Context(w.credential).get(), lr, &out);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << wait;
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2)) << wait;
  }
  // No Lease is left holding a server thread: the drain is quick. (The
  // channel is closed first: an idle client connection keeps gRPC's
  // shutdown waiting to the end of its grace, half of server.drain_seconds.)
  w.stub.reset();
  double seconds = 0;
  server_->Kill(SIGTERM);
  EXPECT_EQ(server_->Wait(std::chrono::seconds(20), &seconds), 0);
  EXPECT_LT(seconds, 5);
}

// A node that cannot isolate untrusted kernels stops at start with exit 4
// (the systemd unit does not restart it) and says why.
TEST_F(FleetTrustTest, AWorkerThatCannotIsolateExitsFour) {
  ASSERT_TRUE(StartServer());
  WorkerProcess& w = AddWorker("no-namespaces", {}, {{"ANVIL_TEST_NO_ISOLATION", "1"}});
  EXPECT_EQ(w.Wait(30), 4) << w.log();
  EXPECT_NE(w.log().find("namespace isolation is not available"), std::string::npos) << w.log();
  EXPECT_EQ(RawInt(db_, "SELECT count(*) FROM workers"), 0);
}

}  // namespace
}  // namespace anvil::testing_fleet
