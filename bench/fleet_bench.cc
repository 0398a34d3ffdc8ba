// fleet_bench: load on the Fleet service. One process: a real store (SQLite
// file), the Fleet and its gRPC service on loopback, and N simulated workers
// (threads, each with its own channel) that lease, and report at once: no
// measuring, so what is timed is the coordinator. Prints:
//   - leases per second and results per second the server sustains;
//   - coordinator overhead per candidate: RemoteEvaluator's Measure round
//     trip (queue, lease, report, wake) for one candidate while the workers
//     are busy with the rest of the load;
//   - time from a worker's death (it holds a lease and goes silent) to its
//     task's re-lease by another worker, for the lease time given.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/strings/str_cat.h"
#include "anvil/v1/fleet.grpc.pb.h"
#include "server/fleet/fleet.h"
#include "server/fleet/fleet_service.h"
#include "server/fleet/remote_evaluator.h"
#include "store/store.h"

namespace anvil {
namespace {

using Clock = std::chrono::steady_clock;
constexpr char kGpu[] = "BENCH-GPU";

double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::unique_ptr<v1::Fleet::Stub> Stub(int port) {
  grpc::ChannelArguments args;
  args.SetInt("grpc.channel_id", rand());  // a connection of its own per worker
  return v1::Fleet::NewStub(grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port),
                                                      grpc::InsecureChannelCredentials(), args));
}

// A registered simulated worker: its id and the credential its calls carry.
struct Worker {
  std::string id, credential;
  // A context for one of its calls.
  std::unique_ptr<grpc::ClientContext> Context() const {
    auto c = std::make_unique<grpc::ClientContext>();
    c->AddMetadata("authorization", absl::StrCat("Bearer ", credential));
    return c;
  }
};

Worker Register(v1::Fleet::Stub& stub, const std::string& name, bool gpu) {
  v1::RegisterWorkerRequest r;
  r.set_hostname(name);
  if (gpu) {
    v1::GpuInfo* g = r.add_gpus();
    g->set_model(kGpu);
    g->set_arch("sm_90a");
    g->set_uuid(absl::StrCat("GPU-", name));
  }
  v1::RegisterWorkerResponse out;
  grpc::ClientContext c;
  if (!stub.RegisterWorker(&c, r, &out).ok()) return {};
  return {out.worker_id(), out.credential()};
}

v1::Task MeasureTask(int i) {
  v1::Task t;
  t.set_kind(v1::TASK_KIND_MEASURE);
  t.mutable_candidate()->set_id(absl::StrCat("candidate-", i));
  t.add_problems()->mutable_shape()->set_m(4096);
  return t;
}

// One simulated worker: lease, report at once, until stopped.
void WorkerLoop(int port, int index, std::atomic<bool>& stop, std::atomic<long>& leases,
                std::atomic<long>& results) {
  auto stub = Stub(port);
  const Worker w = Register(*stub, absl::StrCat("sim-", index), true);
  while (!stop) {
    v1::LeaseRequest lr;
    lr.set_worker_id(w.id);
    lr.set_gpu_ordinal(0);
    lr.set_wait_s(0.2);
    v1::LeaseResponse lease;
    if (!stub->Lease(w.Context().get(), lr, &lease).ok() || !lease.has_task()) continue;
    ++leases;
    v1::ReportResultRequest rr;
    rr.set_worker_id(w.id);
    rr.set_task_id(lease.task().task_id());
    rr.set_attempt(lease.task().attempt());
    for (const v1::Problem& p : lease.task().problems()) {
      v1::Measurement* m = rr.add_measurements();
      m->set_candidate_id(lease.task().candidate().id());
      *m->mutable_problem() = p;
      m->set_verdict(v1::VERDICT_PASSED);
      m->mutable_timings()->mutable_device()->set_median_us(1);
    }
    v1::ReportResultResponse ack;
    if (stub->ReportResult(w.Context().get(), rr, &ack).ok() && ack.accepted()) ++results;
  }
}

double DeathToRelease(Fleet& fleet, int port, double lease_s) {
  auto stub = Stub(port);
  const Worker dying = Register(*stub, "dying", true);
  const Worker survivor = Register(*stub, "survivor", true);
  absl::StatusOr<std::string> id = fleet.Submit(MeasureTask(-1), kGpu, "bench");
  if (!id.ok()) return -1;
  v1::LeaseRequest lr;
  lr.set_worker_id(dying.id);
  lr.set_gpu_ordinal(0);
  v1::LeaseResponse lease;
  if (!stub->Lease(dying.Context().get(), lr, &lease).ok() || lease.task().task_id() != *id) return -1;
  const Clock::time_point death = Clock::now();  // it never heartbeats or reports again
  while (Since(death) < lease_s * 4) {
    v1::LeaseRequest sr;
    sr.set_worker_id(survivor.id);
    sr.set_gpu_ordinal(0);
    sr.set_wait_s(1);
    v1::LeaseResponse got;
    if (stub->Lease(survivor.Context().get(), sr, &got).ok() && got.task().task_id() == *id) return Since(death);
  }
  return -1;
}

int Run(int workers, int tasks, double lease_s, const std::string& dir) {
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto store = Store::Open(dir + "/fleet_bench.db");
  if (!store.ok()) return 1;
  FleetOptions fo;
  fo.lease_seconds = lease_s;
  fo.heartbeat_seconds = lease_s / 4;
  fo.artifact_dir = dir + "/artifacts";
  auto fleet = Fleet::Create(store->get(), fo);
  if (!fleet.ok()) return 1;
  auto open = [](std::optional<std::string>) { return absl::OkStatus(); };
  FleetService service(fleet->get(), open, open);
  grpc::ServerBuilder b;
  int port = 0;
  b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  b.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = b.BuildAndStart();

  for (int i = 0; i < tasks; ++i) (void)(*fleet)->Submit(MeasureTask(i), kGpu, "bench");
  std::atomic<bool> stop{false};
  std::atomic<long> leases{0}, results{0};
  std::vector<std::thread> threads;
  const Clock::time_point start = Clock::now();
  for (int i = 0; i < workers; ++i) {
    threads.emplace_back([&, i] { WorkerLoop(port, i, stop, leases, results); });
  }
  while (results < tasks) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const double seconds = Since(start);
  const long leased = leases, reported = results;
  // Overhead per candidate: Measure through RemoteEvaluator, one candidate at
  // a time, with the 100 workers polling an empty queue (queue, lease,
  // report, wake-up: everything but the measuring).
  RemoteEvaluator remote(fleet->get(), RemoteEvaluatorOptions{absl::Minutes(1), 60, kGpu});
  std::vector<double> overhead_ms;
  for (int i = 0; i < 200; ++i) {
    MeasureRequest m;
    m.candidate.set_id(absl::StrCat("probe-", i));
    m.shapes.push_back(MeasureTask(0).problems(0).shape());
    const Clock::time_point t = Clock::now();
    auto r = remote.Measure({m}, WorkContext{"bench", nullptr});
    if (r.front().ok()) overhead_ms.push_back(Since(t) * 1000);
  }
  stop = true;
  for (std::thread& t : threads) t.join();
  std::sort(overhead_ms.begin(), overhead_ms.end());
  const double death = DeathToRelease(**fleet, port, lease_s);
  server->Shutdown();
  auto p = [&](double q) { return overhead_ms.empty() ? 0 : overhead_ms[size_t(q * (overhead_ms.size() - 1))]; };
  std::printf("| workers | tasks | seconds | leases/s | results/s | overhead p50 ms | p99 ms | death to re-lease s (lease %.1f s) |\n",
              lease_s);
  std::printf("|---|---|---|---|---|---|---|---|\n");
  std::printf("| %d | %d | %.2f | %.0f | %.0f | %.2f | %.2f | %.2f |\n", workers, tasks, seconds,
              leased / seconds, reported / seconds, p(0.5), p(0.99), death);
  return 0;
}

}  // namespace
}  // namespace anvil

int main(int argc, char** argv) {
  CLI::App app("fleet_bench: leases/s, results/s, coordinator overhead and death-to-re-lease of the Fleet service");
  int workers = 100, tasks = 20000;
  double lease_s = 2;
  std::string dir = "/tmp/anvil-fleet-bench";
  app.add_option("--workers", workers, "simulated workers (threads with their own connection)");
  app.add_option("--tasks", tasks, "measure tasks queued before the workers start");
  app.add_option("--lease-seconds", lease_s, "lease time");
  app.add_option("--dir", dir, "scratch folder for the store (removed first)");
  CLI11_PARSE(app, argc, argv);
  return anvil::Run(workers, tasks, lease_s, dir);
}
