#include "server/rpc/serve_main.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <thread>

#include <CLI/CLI.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "server/fleet/fleet.h"
#include "server/fleet/remote_evaluator.h"
#include "server/proposers/job_setup.h"
#include "server/rpc/auth.h"
#include "server/rpc/local_components.h"
#include "server/rpc/metered_evaluator.h"
#include "server/rpc/metrics.h"
#include "server/rpc/server.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"
#include "store/store.h"
#include "store/writer_lock.h"

namespace anvil {
namespace {

// --config FILE, then one flag per option ("tls.cert_file" -> --tls-cert-file).
absl::StatusOr<ServerOptions> ParseOptions(const std::vector<std::string>& args,
                                           const std::string& program) {
  CLI::App app{"Anvil's gRPC coordinator: the KernelSearch service (options: server/CONFIG.md)",
               program};
  std::string config;
  app.add_option("--config", config, "TOML file of options (see server/CONFIG.md)");
  std::map<std::string, std::string> given;
  for (const ServerOptionInfo& o : ListServerOptions()) {
    std::string flag = absl::StrCat("--", absl::StrReplaceAll(o.name, {{".", "-"}, {"_", "-"}}));
    app.add_option(flag, given[o.name], absl::StrCat(o.help, " (default: ", o.default_text, ")"));
  }
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return absl::CancelledError("help");
  } catch (const CLI::ParseError& e) {
    return absl::InvalidArgumentError(e.what());
  }
  ServerOptions options;
  if (!config.empty()) {
    if (absl::Status st = ApplyConfigFile(config, options); !st.ok()) return st;
  }
  if (absl::Status st = ApplyEnvironment(ProcessEnvironment(), options); !st.ok()) return st;
  for (const ServerOptionInfo& o : ListServerOptions()) {
    CLI::Option* opt = app.get_option(absl::StrCat("--", absl::StrReplaceAll(o.name, {{".", "-"}, {"_", "-"}})));
    if (opt->count() == 0) continue;
    if (absl::Status st = ApplyOption(o.name, given[o.name], options); !st.ok()) return st;
  }
  if (absl::Status st = ValidateServerOptions(options); !st.ok()) return st;
  return options;
}

FleetOptions FleetOptionsOf(const ServerOptions& o) {
  FleetOptions f;
  f.lease_seconds = o.fleet_lease_seconds;
  f.heartbeat_seconds = o.fleet_heartbeat_seconds;
  f.quarantine_after = o.fleet_quarantine_after;
  f.worker_wait_seconds = o.fleet_worker_wait_seconds;
  f.artifact_dir = o.fleet_artifact_dir.empty() ? o.db + ".artifacts" : o.fleet_artifact_dir;
  return f;
}

// fleet.enabled: jobs measure on the fleet's workers.
std::unique_ptr<RemoteEvaluator> FleetEvaluator(const ServerOptions& o, Fleet* fleet) {
  RemoteEvaluatorOptions r;
  r.gpu = o.fleet_gpu;
  spdlog::info("anvil serve: measuring on the fleet (lease {} s, heartbeat {} s; a job waits up to {} s for "
               "a live worker)", o.fleet_lease_seconds, o.fleet_heartbeat_seconds, o.fleet_worker_wait_seconds);
  return std::make_unique<RemoteEvaluator>(fleet, r);
}

// No token on a non-loopback address is refused unless asked for by name;
// a token in clear on one is said loudly (TLS is the default to deploy).
absl::Status CheckExposure(const ServerOptions& o) {
  absl::StatusOr<rpc::TokenAuth> auth = rpc::TokenAuth::Load(o.token_file, ProcessEnvironment());
  if (!auth.ok()) return auth.status();
  for (const std::string& listen : {o.listen, o.metrics_listen}) {
    if (listen.empty() || IsLoopbackAddress(listen)) continue;
    if (!auth->enabled() && !o.allow_unauthenticated) {
      return absl::InvalidArgumentError(absl::StrCat(
          "refusing to serve ", listen, " (not loopback) without a bearer token: anyone who reaches it could "
          "run jobs, register workers and read the store. Set auth.token_file (or $ANVIL_AUTH_TOKEN), "
          "or auth.allow_unauthenticated = true to accept the risk"));
    }
    if (!auth->enabled()) {
      spdlog::warn("anvil serve: {} is served WITHOUT AUTHENTICATION (auth.allow_unauthenticated): anyone who "
                   "reaches it can run jobs and register workers", listen);
    } else if (o.cert_file.empty() && listen == o.listen) {
      spdlog::warn("anvil serve: {} is not loopback and speaks PLAINTEXT: the bearer token and the workers' "
                   "credentials cross the network in clear; set tls.cert_file and tls.key_file (server/CONFIG.md)",
                   listen);
    }
  }
  return absl::OkStatus();
}

// What a server with no GPU measures with: nothing (OptimizeKernel is refused first).
class NoEvaluator final : public CandidateEvaluator {
 public:
  explicit NoEvaluator(std::string why) : why_(std::move(why)) {}
  std::vector<absl::StatusOr<v1::Build>> Build(const std::vector<v1::Candidate>& c,
                                               const WorkContext&) override {
    return std::vector<absl::StatusOr<v1::Build>>(c.size(), absl::UnavailableError(why_));
  }
  std::vector<absl::StatusOr<MeasureResult>> Measure(const std::vector<MeasureRequest>& r,
                                                     const WorkContext&) override {
    return std::vector<absl::StatusOr<MeasureResult>>(r.size(), absl::UnavailableError(why_));
  }
  std::optional<v1::RunnerInfo> device() const override { return std::nullopt; }

 private:
  std::string why_;
};

absl::Status WritePortFile(const std::string& path, int port) {
  if (path.empty()) return absl::OkStatus();
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << port << "\n";
    if (!out) return absl::ResourceExhaustedError(absl::StrCat("cannot write ", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::ResourceExhaustedError(absl::StrCat("cannot write ", path));
  }
  return absl::OkStatus();
}

// Waits for SIGTERM or SIGINT (blocked in every thread by the caller).
int AwaitSignal() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  int sig = 0;
  sigwait(&set, &sig);
  return sig;
}

int Fail(const absl::Status& st, int code) {
  spdlog::error("anvil serve: {}", std::string(st.message()));
  return code;
}

// What jobs measure with: the fleet's workers (fleet.enabled), else this
// node's evaluator, else nothing (OptimizeKernel answers UNAVAILABLE and why).
struct Evaluators {
  std::unique_ptr<rpc::MeteredEvaluator> metered;
  RemoteEvaluator* remote = nullptr;  // with fleet.enabled
  std::string none_why;               // why there is no evaluator ("" : there is one)
};

Evaluators MakeEvaluators(const ServerOptions& o, const ServeComponents& components, Fleet* fleet,
                          rpc::ServerMetrics& metrics) {
  Evaluators e;
  absl::StatusOr<std::unique_ptr<CandidateEvaluator>> made = absl::UnknownError("");
  if (o.fleet_enabled) {
    std::unique_ptr<RemoteEvaluator> r = FleetEvaluator(o, fleet);
    e.remote = r.get();
    made = std::unique_ptr<CandidateEvaluator>(std::move(r));
  } else {
    made = components.evaluator(o);
  }
  if (!made.ok()) {
    e.none_why = std::string(made.status().message());
    spdlog::warn("anvil serve: no evaluator ({}); OptimizeKernel answers UNAVAILABLE", e.none_why);
    made = std::unique_ptr<CandidateEvaluator>(std::make_unique<NoEvaluator>(e.none_why));
  }
  e.metered = std::make_unique<rpc::MeteredEvaluator>(*std::move(made), metrics);
  return e;
}

// The job service: this node's proposers (server/proposers/factory.h) unless
// the components bring their own.
absl::StatusOr<std::unique_ptr<JobService>> MakeJobs(const ServerOptions& o,
                                                     const ServeComponents& components,
                                                     Store& store, CandidateEvaluator& evaluator) {
  JobSetup setup;
  setup.store = &store;
  setup.evaluator = &evaluator;
  setup.job = JobOptionsOf(o);
  if (components.proposers) {
    absl::StatusOr<ProposerSet> set = components.proposers(o, store);
    if (!set.ok()) return set.status();
    setup.proposer_set = *std::move(set);
  } else {
    absl::StatusOr<ProposerSetupOptions> node = NodeProposers(o);
    if (!node.ok()) return node.status();
    setup.proposers = *std::move(node);
  }
  return MakeJobService(std::move(setup));
}

}  // namespace

int ServeMain(const std::vector<std::string>& args, const ServeComponents& components,
              const std::string& program) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);  // every thread made from here on inherits it
  spdlog::set_default_logger(spdlog::stderr_color_mt("anvil-serve"));  // stdout stays clean

  absl::StatusOr<ServerOptions> options = ParseOptions(args, program);
  if (!options.ok()) return absl::IsCancelled(options.status()) ? 0 : Fail(options.status(), 2);
  if (absl::Status st = CheckExposure(*options); !st.ok()) return Fail(st, 2);
  // One writer per store: a second server or an `anvil optimize` on the same
  // file is refused here, not raced.
  absl::StatusOr<WriterLock> writer = WriterLock::Acquire(options->db, "anvil serve");
  if (!writer.ok()) return Fail(writer.status(), 4);
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(options->db);
  if (!store.ok()) return Fail(store.status(), 4);
  absl::StatusOr<std::unique_ptr<rpc::ServerMetrics>> metrics = Server::MakeMetrics(*options, **store);
  if (!metrics.ok()) return Fail(metrics.status(), 3);

  absl::StatusOr<std::unique_ptr<Fleet>> fleet = Fleet::Create(store->get(), FleetOptionsOf(*options));
  if (!fleet.ok()) return Fail(fleet.status(), 4);
  Evaluators evaluators = MakeEvaluators(*options, components, fleet->get(), **metrics);
  rpc::MeteredEvaluator& evaluator = *evaluators.metered;
  absl::StatusOr<std::unique_ptr<JobService>> jobs = MakeJobs(*options, components, **store, evaluator);
  if (!jobs.ok()) return Fail(jobs.status(), 1);

  ServerParts parts;
  parts.store = store->get();
  parts.jobs = jobs->get();
  parts.metrics = metrics->get();
  parts.no_evaluator_reason = evaluators.none_why;
  parts.gpu = [&evaluator, known = components.gpu] {
    std::optional<v1::RunnerInfo> d = evaluator.device();
    return d ? d->gpu() : known;
  };
  if (RemoteEvaluator* remote = evaluators.remote; remote != nullptr) {
    parts.can_run = [remote](const std::string& gpu) { return remote->CanRun(gpu); };
    // the Fleet service only with fleet.enabled: a worker or `anvil workers`
    // elsewhere is told UNIMPLEMENTED
    parts.fleet = fleet->get();
  }
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(*options, parts);
  if (!server.ok()) return Fail(server.status(), 3);
  if (absl::Status st = WritePortFile(options->port_file, (*server)->port()); !st.ok()) return Fail(st, 1);

  const int sig = AwaitSignal();
  spdlog::info("anvil serve: {} received; draining within {} s", strsignal(sig), options->drain_seconds);
  // The hard deadline: whatever is still stopping then, the store already
  // holds (every measurement is committed as it is taken); exit 0.
  std::thread([seconds = options->drain_seconds] {
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    spdlog::warn("anvil serve: drain deadline reached; exiting with jobs still stopping (they resume)");
    std::fflush(nullptr);
    _exit(0);
  }).detach();
  (*server)->Drain(absl::Seconds(options->drain_seconds * 0.5));
  server->reset();
  jobs->reset();
  return 0;
}

}  // namespace anvil
