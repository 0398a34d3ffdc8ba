#include "worker/fleet/fleet_worker.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "anvil/v1/fleet.grpc.pb.h"
#include "proto/candidate.h"
#include "proto/grpc_status.h"
#include "spdlog/spdlog.h"
#include "worker/builder.h"

namespace anvil {
namespace {

constexpr char kDigestPrefix[] = "sha256:";

absl::StatusOr<std::string> ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

absl::Status WriteBytes(const std::string& path, const std::string& data) {
  const std::string tmp = absl::StrCat(path, ".tmp.", getpid());
  {
    std::ofstream out(tmp, std::ios::binary);
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
    if (!out) return absl::ResourceExhaustedError(absl::StrCat("cannot write ", tmp));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return absl::ResourceExhaustedError(absl::StrCat("cannot write ", path, ": ", ec.message()));
  return absl::OkStatus();
}

// Plaintext, or TLS with the system's roots or those of options.tls_ca.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> Credentials(const FleetWorkerOptions& options) {
  if (!options.tls && options.tls_ca.empty()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions ssl;
  if (!options.tls_ca.empty()) {
    std::ifstream in(options.tls_ca);
    if (!in) return absl::InvalidArgumentError(absl::StrCat("cannot read --tls-ca ", options.tls_ca));
    ssl.pem_root_certs.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return grpc::SslCredentials(ssl);
}

}  // namespace

struct FleetWorker::Impl {
  FleetWorkerOptions options;
  FleetWorkerComponents components;
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  std::shared_ptr<v1::Fleet::Stub> stub ABSL_GUARDED_BY(mu);
  absl::Time connected_at ABSL_GUARDED_BY(mu);
  std::vector<v1::GpuInfo> gpus;
  std::string worker_id;
  std::atomic<double> heartbeat_s{5};
  std::atomic<bool> stop{false};
  absl::Mutex mu;
  std::set<std::string> in_flight ABSL_GUARDED_BY(mu);
  std::set<std::string> abandoned ABSL_GUARDED_BY(mu);  // in flight, no longer ours
  std::string credential ABSL_GUARDED_BY(mu);           // issued at registration
  absl::Mutex register_mu;                              // one registration at a time

  // A call's context: the worker's credential (RegisterWorker: the enrolment token).
  std::unique_ptr<grpc::ClientContext> Context(double deadline_s, bool enrol = false) {
    auto c = std::make_unique<grpc::ClientContext>();
    std::string secret = options.token;
    if (!enrol) {
      absl::MutexLock lock(&mu);
      secret = credential;
    }
    if (!secret.empty()) c->AddMetadata("authorization", absl::StrCat("Bearer ", secret));
    c->set_deadline(std::chrono::system_clock::now() +
                    std::chrono::milliseconds(static_cast<int64_t>(deadline_s * 1000)));
    return c;
  }
  std::shared_ptr<v1::Fleet::Stub> Stub() {
    absl::MutexLock lock(&mu);
    return stub;
  }
  // A new channel to the server. After an outage gRPC's channel goes on
  // failing calls for its reconnect backoff (seconds, growing to two
  // minutes: longer than a lease) although the server is back; a fresh
  // channel connects at once. At most once a second.
  void Reconnect() {
    absl::MutexLock lock(&mu);
    if (stub != nullptr && absl::Now() - connected_at < absl::Seconds(1)) return;
    stub = v1::Fleet::NewStub(grpc::CreateChannel(options.server, credentials));
    connected_at = absl::Now();
  }
  bool Abandoned(const std::string& task_id) {
    absl::MutexLock lock(&mu);
    return abandoned.count(task_id) > 0;
  }

  absl::Status Register();
  // The server no longer knows this worker or its credential (its store was
  // replaced, or the node registered again elsewhere): register again.
  void RegisterAgainIfForgotten(const grpc::Status& s);
  void HeartbeatLoop();
  void SlotLoop(int ordinal, CandidateEvaluator& evaluator);
  v1::ReportResultRequest RunTask(const v1::Task& task, CandidateEvaluator& evaluator);
  // A call tried again while the server cannot be reached (a restart): up
  // to two minutes, a second apart, until it answers or the worker stops.
  // Its unreachable server is not this node's failure.
  grpc::Status WhileServerAway(const std::function<grpc::Status()>& call);
  absl::Status UploadArtifact(v1::Build& build);
  absl::StatusOr<std::string> LocalArtifact(const std::string& digest);
  void Report(v1::ReportResultRequest report);
};

absl::Status FleetWorker::Impl::Register() {
  absl::MutexLock registering(&register_mu);
  v1::RegisterWorkerRequest req;
  req.set_hostname(options.hostname);
  for (const v1::GpuInfo& g : gpus) *req.add_gpus() = g;
  req.set_build_jobs(options.build_slots);
  req.set_versions(components.versions ? components.versions() : options.versions);
  v1::RegisterWorkerResponse resp;
  // The server may not be up yet (a node booting with it): keep trying, and
  // say so at the first failure and every tenth after it.
  for (int attempt = 0;; ++attempt) {
    grpc::Status s = Stub()->RegisterWorker(Context(10, /*enrol=*/true).get(), req, &resp);
    if (s.ok()) break;
    if (s.error_code() != grpc::StatusCode::UNAVAILABLE || stop || attempt >= 60) return rpc::FromGrpc(s);
    if (attempt % 10 == 0) {
      spdlog::warn("anvil worker: cannot register with {} yet ({}); try {} of 61{}", options.server,
                   s.error_message(), attempt + 1,
                   options.tls ? "" : " (if the server has a TLS certificate, start this worker with --tls-ca FILE or --tls)");
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  {
    absl::MutexLock lock(&mu);
    credential = resp.credential();
  }
  if (worker_id.empty()) {
    worker_id = resp.worker_id();  // the node's id: the same at every registration
  } else if (worker_id != resp.worker_id()) {
    spdlog::error("anvil worker: registered again as {}, not {}; keeping {}", resp.worker_id(), worker_id, worker_id);
  }
  heartbeat_s = resp.heartbeat_interval_s() > 0 ? resp.heartbeat_interval_s() : 5;
  spdlog::info("anvil worker: registered as {} ({} GPUs, {} build slots{}; lease {} s, heartbeat {} s)", worker_id,
               gpus.size(), options.build_slots, options.build_only ? ", build-only" : "", resp.lease_timeout_s(),
               heartbeat_s);
  return absl::OkStatus();
}

void FleetWorker::Impl::RegisterAgainIfForgotten(const grpc::Status& s) {
  if (s.error_code() != grpc::StatusCode::NOT_FOUND && s.error_code() != grpc::StatusCode::UNAUTHENTICATED) return;
  spdlog::warn("anvil worker: the server does not know this worker any more ({}); registering again",
               s.error_message());
  if (absl::Status st = Register(); !st.ok()) {
    spdlog::error("anvil worker: registering again failed: {}", std::string(st.message()));
  }
}

void FleetWorker::Impl::HeartbeatLoop() {
  while (!stop) {
    v1::HeartbeatRequest req;
    req.set_worker_id(worker_id);
    {
      absl::MutexLock lock(&mu);
      for (const std::string& id : in_flight) req.add_task_ids(id);
    }
    v1::HeartbeatResponse resp;
    grpc::Status s = Stub()->Heartbeat(Context(heartbeat_s).get(), req, &resp);
    if (!s.ok()) {
      spdlog::warn("anvil worker: heartbeat failed: {}", s.error_message());
      RegisterAgainIfForgotten(s);
      // Back to a restarted server at the next heartbeat: a server outage
      // must cost the worker no lease it could have kept.
      if (s.error_code() == grpc::StatusCode::UNAVAILABLE) Reconnect();
    }
    for (const std::string& id : resp.cancelled_task_ids()) {
      absl::MutexLock lock(&mu);
      if (in_flight.count(id) == 0 || !abandoned.insert(id).second) continue;
      spdlog::warn("anvil worker: task {} is no longer ours (its job was cancelled or ended, or it was "
                   "leased again); abandoning it at the next safe point", id);
    }
    for (double waited = 0; waited < heartbeat_s && !stop; waited += 0.05) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
}

grpc::Status FleetWorker::Impl::WhileServerAway(const std::function<grpc::Status()>& call) {
  grpc::Status s = call();
  for (int tries = 1; tries < 120 && !stop &&
                      (s.error_code() == grpc::StatusCode::UNAVAILABLE ||
                       s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED);
       ++tries) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    s = call();
  }
  return s;
}

absl::Status FleetWorker::Impl::UploadArtifact(v1::Build& build) {
  if (build.verdict() != v1::VERDICT_PASSED || build.artifact().empty()) return absl::OkStatus();
  absl::StatusOr<std::string> data = ReadBytes(build.artifact());
  if (!data.ok()) return data.status();
  const std::string digest = Sha256Hex(*data);
  const std::string local = absl::StrCat(options.cache_dir, "/", digest, ".so");
  if (!std::filesystem::exists(local)) {
    if (absl::Status st = WriteBytes(local, *data); !st.ok()) return st;
  }
  v1::PutArtifactRequest req;
  req.set_worker_id(worker_id);
  req.set_sha256(digest);
  req.set_data(*std::move(data));
  v1::PutArtifactResponse resp;
  grpc::Status put = WhileServerAway([&] { return Stub()->PutArtifact(Context(60).get(), req, &resp); });
  RegisterAgainIfForgotten(put);
  if (absl::Status st = rpc::FromGrpc(put); !st.ok()) return st;
  build.set_artifact(absl::StrCat(kDigestPrefix, digest));
  return absl::OkStatus();
}

absl::StatusOr<std::string> FleetWorker::Impl::LocalArtifact(const std::string& artifact) {
  if (!absl::StartsWith(artifact, kDigestPrefix)) return artifact;  // a path on this node
  const std::string digest = artifact.substr(sizeof(kDigestPrefix) - 1);
  const std::string local = absl::StrCat(options.cache_dir, "/", digest, ".so");
  absl::StatusOr<std::string> cached = ReadBytes(local);
  if (cached.ok() && Sha256Hex(*cached) == digest) return local;
  v1::GetArtifactRequest req;
  req.set_worker_id(worker_id);
  req.set_sha256(digest);
  v1::GetArtifactResponse resp;
  grpc::Status got = WhileServerAway([&] { return Stub()->GetArtifact(Context(60).get(), req, &resp); });
  RegisterAgainIfForgotten(got);
  if (absl::Status st = rpc::FromGrpc(got); !st.ok()) return st;
  if (Sha256Hex(resp.data()) != digest) {
    return absl::DataLossError(absl::StrCat("artifact ", digest, " arrived corrupt (hash mismatch)"));
  }
  if (absl::Status st = WriteBytes(local, resp.data()); !st.ok()) return st;
  return local;
}

v1::ReportResultRequest FleetWorker::Impl::RunTask(const v1::Task& task, CandidateEvaluator& evaluator) {
  v1::ReportResultRequest r;
  r.set_worker_id(worker_id);
  r.set_task_id(task.task_id());
  r.set_attempt(task.attempt());
  const absl::Time start = absl::Now();
  absl::Status failure;
  // Abandoned at the next safe point once the server says the task is no
  // longer this worker's (the sandbox kills its build or runner). The job id
  // lets the job's screens share a runner that stays up.
  const WorkContext context{task.job_id(), [this, id = task.task_id()] { return Abandoned(id); }};
  if (task.kind() == v1::TASK_KIND_BUILD) {
    absl::StatusOr<v1::Build> b = std::move(evaluator.Build({task.candidate()}, context).front());
    if (b.ok()) {
      failure = UploadArtifact(*b);
      *r.mutable_build() = *std::move(b);
    } else {
      failure = b.status();
    }
  } else {
    MeasureRequest m;
    m.candidate = task.candidate();
    m.build = task.build();
    for (const v1::Problem& p : task.problems()) m.shapes.push_back(p.shape());
    m.recheck = task.recheck();
    m.fidelity = task.fidelity() == v1::FIDELITY_SCREEN ? v1::FIDELITY_SCREEN : v1::FIDELITY_FULL;
    m.figure = task.figure();
    m.known_lt_algos.assign(task.known_lt_algos().begin(), task.known_lt_algos().end());
    absl::StatusOr<std::string> local = LocalArtifact(m.build.artifact());
    absl::StatusOr<MeasureResult> res = absl::UnknownError("not measured");
    if (local.ok()) {
      m.build.set_artifact(*local);
      res = std::move(evaluator.Measure({m}, context).front());
    } else {
      res = local.status();
    }
    if (res.ok()) {
      for (const v1::Measurement& x : res->measurements) *r.add_measurements() = x;
      for (const v1::LtAlgo& a : res->tuned) *r.add_tuned() = a;
    } else {
      failure = res.status();
    }
  }
  r.set_seconds(absl::ToDoubleSeconds(absl::Now() - start));
  if (!failure.ok()) r.set_infrastructure_error(std::string(failure.message()));
  return r;
}

void FleetWorker::Impl::Report(v1::ReportResultRequest report) {
  // Until the server answers: a lost acknowledgement is answered by the
  // retry (the same task and attempt is accepted once).
  bool registered_again = false;
  for (double backoff = 0.1; !stop || backoff < 1; backoff = std::min(backoff * 2, 5.0)) {
    v1::ReportResultResponse resp;
    grpc::Status s = Stub()->ReportResult(Context(30).get(), report, &resp);
    if (s.ok()) {
      if (!resp.accepted()) spdlog::warn("anvil worker: task {}: {}", report.task_id(), resp.reason());
      return;
    }
    if (!registered_again &&
        (s.error_code() == grpc::StatusCode::NOT_FOUND || s.error_code() == grpc::StatusCode::UNAUTHENTICATED)) {
      RegisterAgainIfForgotten(s);  // then the report goes once more, as this worker
      registered_again = true;
      continue;
    }
    if (s.error_code() != grpc::StatusCode::UNAVAILABLE &&
        s.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) {
      spdlog::error("anvil worker: reporting task {} failed: {}", report.task_id(), s.error_message());
      return;
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(backoff));
  }
}

void FleetWorker::Impl::SlotLoop(int ordinal, CandidateEvaluator& evaluator) {
  while (!stop) {
    v1::LeaseRequest req;
    req.set_worker_id(worker_id);
    req.set_gpu_ordinal(ordinal);
    req.set_wait_s(options.lease_wait_s);
    v1::LeaseResponse resp;
    grpc::Status s = Stub()->Lease(Context(options.lease_wait_s + 10).get(), req, &resp);
    if (!s.ok()) {
      spdlog::warn("anvil worker: slot {}: lease failed: {}", ordinal, s.error_message());
      RegisterAgainIfForgotten(s);
      std::this_thread::sleep_for(std::chrono::seconds(1));
      continue;
    }
    if (!resp.has_task()) continue;
    const std::string id = resp.task().task_id();
    {
      absl::MutexLock lock(&mu);
      in_flight.insert(id);
    }
    v1::ReportResultRequest report = RunTask(resp.task(), evaluator);
    if (Abandoned(id)) {
      spdlog::info("anvil worker: slot {}: task {} abandoned; nothing reported", ordinal, id);
    } else {
      Report(std::move(report));
    }
    absl::MutexLock lock(&mu);
    in_flight.erase(id);
    abandoned.erase(id);
  }
}

FleetWorker::FleetWorker(FleetWorkerOptions options, FleetWorkerComponents components)
    : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  impl_->components = std::move(components);
}

FleetWorker::~FleetWorker() = default;

void FleetWorker::Stop() { impl_->stop = true; }

absl::Status FleetWorker::Run() {
  Impl& w = *impl_;
  if (w.options.hostname.empty()) {
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    w.options.hostname = host;
  }
  std::error_code ec;
  std::filesystem::create_directories(w.options.cache_dir, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("cannot create ", w.options.cache_dir));
  std::vector<v1::GpuInfo> gpus;
  if (!w.options.build_only) {
    absl::StatusOr<std::vector<v1::GpuInfo>> found = w.components.gpus();
    if (!found.ok()) return found.status();
    if (found->empty()) return absl::UnavailableError("no GPU on this node; use --build-only");
    if (w.components.check_cache_dir) {
      if (absl::Status st = w.components.check_cache_dir(w.options.cache_dir); !st.ok()) {
        return absl::UnavailableError(absl::StrCat("the GPU slots' sandboxed runs cannot read --cache-dir: ",
                                                   st.message()));
      }
    }
    gpus = *std::move(found);
  }
  if (w.options.build_slots < 0) {
    w.options.build_slots = DefaultBuildJobs();
  }
  if (w.options.build_only && w.options.build_slots == 0) {
    return absl::InvalidArgumentError("a build-only worker needs at least one build slot");
  }
  // GPU slots are their ordinals; build slot i is -(i + 1), so the task
  // table tells the build slots apart.
  std::vector<int> slots;
  for (const v1::GpuInfo& g : gpus) slots.push_back(g.ordinal());
  for (int i = 0; i < w.options.build_slots; ++i) slots.push_back(-(i + 1));
  std::vector<std::unique_ptr<CandidateEvaluator>> evaluators;
  for (int ordinal : slots) {
    absl::StatusOr<std::unique_ptr<CandidateEvaluator>> e = w.components.evaluator(ordinal);
    if (!e.ok()) return e.status();
    evaluators.push_back(*std::move(e));
  }
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> creds = Credentials(w.options);
  if (!creds.ok()) return creds.status();
  w.credentials = *creds;
  w.Reconnect();
  w.gpus = gpus;
  if (absl::Status st = w.Register(); !st.ok()) return st;
  std::thread heartbeat([&w] { w.HeartbeatLoop(); });
  std::vector<std::thread> threads;
  for (size_t i = 0; i < slots.size(); ++i) {
    threads.emplace_back([&w, &evaluators, &slots, i] { w.SlotLoop(slots[i], *evaluators[i]); });
  }
  for (std::thread& t : threads) t.join();
  heartbeat.join();
  return absl::OkStatus();
}

}  // namespace anvil
