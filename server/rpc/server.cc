// Server: builds the gRPC server (credentials, limits, keepalive, health,
// reflection), owns the executor and metrics, and drains on request.
#include "server/rpc/server.h"

#include <cctype>
#include <fstream>
#include <map>
#include <thread>
#include <sstream>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include "absl/strings/str_cat.h"
#include "report/status.h"
#include "reward/reward.h"
#include "server/fleet/fleet_service.h"
#include "server/job_service.h"
#include "server/rpc/service.h"
#include "spdlog/spdlog.h"
#include "store/store.h"

namespace anvil {
namespace {

constexpr char kServiceName[] = "anvil.v1.KernelSearch";

bool IsTerminal(v1::JobState s) {
  return s == v1::JOB_STATE_SUCCEEDED || s == v1::JOB_STATE_FAILED || s == v1::JOB_STATE_CANCELLED;
}

std::string StateLabel(v1::JobState s) {
  std::string name = v1::JobState_Name(s);  // JOB_STATE_RUNNING -> running
  name = name.substr(std::string("JOB_STATE_").size());
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name;
}

absl::StatusOr<std::string> ReadFile(const std::string& path, const char* what) {
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("cannot read ", what, " ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> Credentials(const ServerOptions& o) {
  if (o.cert_file.empty()) return grpc::InsecureServerCredentials();
  absl::StatusOr<std::string> cert = ReadFile(o.cert_file, "tls.cert_file");
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadFile(o.key_file, "tls.key_file");
  if (!key.ok()) return key.status();
  grpc::SslServerCredentialsOptions ssl;
  ssl.pem_key_cert_pairs.push_back({*key, *cert});
  return grpc::SslServerCredentials(ssl);
}

// Limits and keepalive (server/CONFIG.md explains each).
void Configure(const ServerOptions& o, grpc::ServerBuilder& b) {
  b.SetMaxReceiveMessageSize(o.max_receive_message_bytes);
  b.SetMaxSendMessageSize(o.max_send_message_bytes);
  b.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, o.keepalive_time_ms);
  b.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, o.keepalive_timeout_ms);
  b.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, o.permit_keepalive_without_calls ? 1 : 0);
  b.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, o.min_client_ping_interval_ms);
  b.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
}

}  // namespace

struct Server::Impl {
  ServerOptions options;
  Store* store = nullptr;
  JobService* jobs = nullptr;
  rpc::TokenAuth auth = rpc::TokenAuth::Off();
  rpc::TokenAuth enrol = rpc::TokenAuth::Off();  // RegisterWorker's
  Fleet* fleet = nullptr;
  std::unique_ptr<rpc::Executor> executor;
  rpc::ServerMetrics* metrics = nullptr;
  std::unique_ptr<rpc::KernelSearchService> service;
  std::unique_ptr<FleetService> fleet_service;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  absl::Mutex mu;
  bool drained ABSL_GUARDED_BY(mu) = false;
  bool draining ABSL_GUARDED_BY(mu) = false;
  std::map<std::string, std::unique_ptr<Watch>> metric_watches ABSL_GUARDED_BY(mu);

  void WatchForMetrics(const std::string& job_id);
  void EndWatch(const std::string& job_id);
};

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

absl::StatusOr<std::unique_ptr<rpc::ServerMetrics>> Server::MakeMetrics(const ServerOptions& options,
                                                                        Store& store) {
  // The status page (report/status.h) on the same port, behind the API's token.
  absl::StatusOr<rpc::TokenAuth> auth = rpc::TokenAuth::Load(options.token_file, ProcessEnvironment());
  if (!auth.ok()) return auth.status();
  rpc::HttpPages pages = [&store, auth = *auth](const rpc::HttpGet& get) {
    report::StatusRequest r{get.method, get.path, get.query, get.authorization};
    report::StatusResponse s = report::HandleStatusRequest(
        r, store, nullptr, [&auth](const std::string& authorization) {
          return auth.CheckHeader(authorization.empty() ? std::nullopt
                                                        : std::optional<std::string>(authorization))
              .ok();
        });
    return rpc::HttpAnswer{s.handled, s.code, s.content_type, s.body};
  };
  return rpc::ServerMetrics::Start(options.metrics_listen, [&store, db = options.db] {
    rpc::MetricsSnapshot s;
    for (v1::JobState st : {v1::JOB_STATE_QUEUED, v1::JOB_STATE_RUNNING, v1::JOB_STATE_SUCCEEDED,
                            v1::JOB_STATE_FAILED, v1::JOB_STATE_CANCELLED}) {
      absl::StatusOr<std::vector<v1::Job>> jobs = store.ListJobs(1000000, st);
      s.jobs_by_state[StateLabel(st)] = jobs.ok() ? static_cast<int64_t>(jobs->size()) : 0;
    }
    s.queue_depth = s.jobs_by_state["queued"];
    s.store_bytes = rpc::StoreBytes(db);
    return s;
  }, std::move(pages));
}

absl::StatusOr<std::unique_ptr<Server>> Server::Start(const ServerOptions& options,
                                                      const ServerParts& parts) {
  if (absl::Status st = ValidateServerOptions(options); !st.ok()) return st;
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->store = parts.store;
  impl->jobs = parts.jobs;
  impl->metrics = parts.metrics;
  impl->fleet = parts.fleet;
  Store& store = *parts.store;
  JobService& jobs = *parts.jobs;
  absl::StatusOr<rpc::TokenAuth> auth = rpc::TokenAuth::Load(options.token_file, ProcessEnvironment());
  if (!auth.ok()) return auth.status();
  impl->auth = *auth;
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> creds = Credentials(options);
  if (!creds.ok()) return creds.status();
  impl->executor = std::make_unique<rpc::Executor>(options.executor_threads);
  Impl* raw = impl.get();
  rpc::ServiceDeps deps{&impl->options, &store, &jobs, impl->executor.get(), impl->metrics,
                        &impl->auth, [raw](const std::string& id) { raw->WatchForMetrics(id); },
                        parts.no_evaluator_reason, parts.gpu, parts.can_run};
  impl->service = std::make_unique<rpc::KernelSearchService>(std::move(deps));

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen, *creds, &impl->port);
  Configure(options, builder);
  builder.RegisterService(impl->service.get());
  if (parts.fleet != nullptr) {
    // Workers register with the enrolment token (its own file, else the API's).
    absl::StatusOr<rpc::TokenAuth> enrol =
        options.fleet_enrolment_token_file.empty()
            ? absl::StatusOr<rpc::TokenAuth>(impl->auth)
            : rpc::TokenAuth::Load(options.fleet_enrolment_token_file, {});
    if (!enrol.ok()) return enrol.status();
    impl->enrol = *enrol;
    auto check = [](const rpc::TokenAuth* a) {
      return [a](std::optional<std::string> header) { return a->CheckHeader(std::move(header)); };
    };
    impl->fleet_service = std::make_unique<FleetService>(parts.fleet, check(&impl->enrol), check(&impl->auth));
    builder.RegisterService(impl->fleet_service.get());
  }
  impl->server = builder.BuildAndStart();
  if (impl->server == nullptr || impl->port == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options.listen,
                                               " (in use, or not an address of this host)"));
  }
  grpc::HealthCheckServiceInterface* health = impl->server->GetHealthCheckService();
  health->SetServingStatus(kServiceName, true);
  if (parts.fleet != nullptr) health->SetServingStatus("anvil.v1.Fleet", true);
  spdlog::info("anvil serve: {} on port {} ({}{}), store {}", kServiceName, impl->port,
               options.cert_file.empty() ? "plaintext" : "TLS",
               impl->auth.enabled() ? ", bearer token required" : "", options.db);
  // Jobs a previous process left QUEUED or RUNNING go on where the store says.
  absl::StatusOr<int> resumed = jobs.ResumeInterrupted();
  if (!resumed.ok()) return resumed.status();
  if (*resumed > 0) {
    spdlog::info("anvil serve: resumed {} interrupted jobs", *resumed);
    absl::StatusOr<std::vector<v1::Job>> running = jobs.ListJobs(10000, v1::JOB_STATE_RUNNING);
    if (running.ok()) {
      for (const v1::Job& j : *running) raw->WatchForMetrics(j.id());
    }
  }
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

// Rewards by the job's own figure, from its measured events.
void Server::Impl::WatchForMetrics(const std::string& job_id) {
  absl::StatusOr<v1::OptimizeKernelRequest> request = store->GetJobRequest(job_id);
  const std::string figure =
      request.ok() && !request->reward_figure().empty() ? request->reward_figure() : "device";
  // What this run's events reported so far (they carry running totals).
  auto seen = std::make_shared<CoordinatorTime>();
  absl::StatusOr<std::unique_ptr<Watch>> watch =
      jobs->WatchJob(job_id, [this, job_id, figure, seen](const JobEvent& e) {
        const CoordinatorTime& now = e.usage.coordinator;
        if (now.wall_seconds > 0) {
          if (now.wall_seconds < seen->wall_seconds) *seen = CoordinatorTime();  // a new run
          metrics->CoordinatorSpent(now.overhead_seconds() - seen->overhead_seconds(),
                                    now.evaluator_seconds - seen->evaluator_seconds,
                                    now.candidates - seen->candidates);
          *seen = now;
        }
        if (e.kind == JobEventKind::kMeasured && e.measurement) {
          absl::StatusOr<RewardValue> r = ComputeReward(*e.measurement, figure);
          if (r.ok()) metrics->Rewarded(r->value);
        }
        if (e.kind == JobEventKind::kState && IsTerminal(e.job.state())) {
          executor->Submit([this, job_id] { EndWatch(job_id); });
        }
      });
  if (!watch.ok()) return;
  absl::MutexLock lock(&mu);
  metric_watches[job_id] = *std::move(watch);
}

void Server::Impl::EndWatch(const std::string& job_id) {
  std::unique_ptr<Watch> w;
  {
    absl::MutexLock lock(&mu);
    auto it = metric_watches.find(job_id);
    if (it == metric_watches.end()) return;
    w = std::move(it->second);
    metric_watches.erase(it);
  }
}

Server::~Server() { Drain(absl::ZeroDuration()); }

int Server::port() const { return impl_->port; }
int Server::metrics_port() const { return impl_->metrics->port(); }

void Server::Drain(absl::Duration grace) {
  {
    absl::MutexLock lock(&impl_->mu);
    if (impl_->draining) return;
    impl_->draining = true;
  }
  const absl::Time deadline = absl::Now() + grace;
  impl_->server->GetHealthCheckService()->Shutdown();  // NOT_SERVING, from now on
  impl_->service->StopAccepting();
  spdlog::info("anvil serve: draining (NOT_SERVING; checkpointing running jobs)");
  // Jobs stop at their next checkpoint (everything measured is stored as it
  // is measured; the store resumes them in the next process). Their waits on
  // fleet tasks end now: the tasks stay queued for the next process.
  impl_->jobs->Shutdown();
  if (impl_->fleet != nullptr) impl_->fleet->Shutdown();
  impl_->service->CloseStreams();
  impl_->server->Shutdown(absl::ToChronoTime(std::max(deadline, absl::Now())));
  {
    absl::MutexLock lock(&impl_->mu);
    impl_->metric_watches.clear();
    impl_->drained = true;
  }
  spdlog::info("anvil serve: drained");
}

void Server::Wait() {
  absl::MutexLock lock(&impl_->mu);
  impl_->mu.Await(absl::Condition(&impl_->drained));
}

}  // namespace anvil
