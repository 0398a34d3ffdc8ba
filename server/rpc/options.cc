// The option table and the three ways of setting an option (TOML, environment, flag).
#include "server/rpc/options.h"

#include <cmath>
#include <cstdlib>
#include <variant>

#include <toml++/toml.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "proto/figures.h"

extern char** environ;

namespace anvil {
namespace {

using Field = std::variant<std::string ServerOptions::*, int ServerOptions::*,
                           double ServerOptions::*, bool ServerOptions::*>;

struct Entry {
  const char* name;  // section.key
  Field field;
  const char* help;
};

// Every option, once. CONFIG.md documents the same list (a test checks it).
const Entry kTable[] = {
    {"server.listen", &ServerOptions::listen, "host:port of the gRPC service (port 0: any free port)"},
    {"server.db", &ServerOptions::db, "the SQLite store; the server is its only writer"},
    {"server.port_file", &ServerOptions::port_file, "write the bound gRPC port here once serving"},
    {"server.executor_threads", &ServerOptions::executor_threads, "threads running RPC work off the gRPC threads"},
    {"server.drain_seconds", &ServerOptions::drain_seconds, "SIGTERM: seconds to checkpoint jobs and exit"},
    {"jobs.max_active_jobs", &ServerOptions::max_active_jobs, "jobs queued or running before RESOURCE_EXHAUSTED"},
    {"jobs.max_problems_per_job", &ServerOptions::max_problems_per_job, "problems in one OptimizeKernel"},
    {"jobs.default_figure", &ServerOptions::default_figure, "reward figure of a request naming none"},
    {"jobs.default_wall_seconds", &ServerOptions::default_wall_seconds, "Budget.max_wall_seconds when 0 in a request"},
    {"jobs.default_gpu_seconds", &ServerOptions::default_gpu_seconds, "Budget.max_gpu_seconds when 0 (0: no limit)"},
    {"jobs.default_candidates", &ServerOptions::default_candidates, "Budget.max_candidates when 0 (0: no limit)"},
    {"jobs.default_plateau_candidates", &ServerOptions::default_plateau_candidates, "Budget.plateau_candidates when 0 (0: none)"},
    {"jobs.default_target_efficiency", &ServerOptions::default_target_efficiency, "Budget.target_efficiency when 0 (0: none)"},
    {"jobs.build_chunk", &ServerOptions::build_chunk, "candidates per build/measure round"},
    {"jobs.measure_batch", &ServerOptions::measure_batch, "screens (candidate, problem items) per runner process"},
    {"jobs.llm_config", &ServerOptions::llm_config, "LLM endpoint JSON file: jobs run the LLM proposer beside the embedded search"},
    {"jobs.max_watchers", &ServerOptions::max_watchers, "open progress streams before RESOURCE_EXHAUSTED"},
    {"limits.max_receive_message_bytes", &ServerOptions::max_receive_message_bytes, "largest request accepted"},
    {"limits.max_send_message_bytes", &ServerOptions::max_send_message_bytes, "largest response sent"},
    {"keepalive.time_ms", &ServerOptions::keepalive_time_ms, "ping an idle connection this often"},
    {"keepalive.timeout_ms", &ServerOptions::keepalive_timeout_ms, "drop a connection whose ping is unanswered this long"},
    {"keepalive.min_client_ping_interval_ms", &ServerOptions::min_client_ping_interval_ms, "clients pinging more often are sent GOAWAY"},
    {"keepalive.permit_without_calls", &ServerOptions::permit_keepalive_without_calls, "clients may ping with no call open"},
    {"auth.token_file", &ServerOptions::token_file, "file holding the bearer token clients must send ($ANVIL_AUTH_TOKEN: the token itself)"},
    {"auth.allow_unauthenticated", &ServerOptions::allow_unauthenticated, "serve a non-loopback address without a token (refused otherwise)"},
    {"tls.cert_file", &ServerOptions::cert_file, "PEM certificate chain (TLS on when set with tls.key_file)"},
    {"tls.key_file", &ServerOptions::key_file, "PEM private key"},
    {"metrics.listen", &ServerOptions::metrics_listen, "host:port of the Prometheus /metrics endpoint (empty: off)"},
    {"export.root", &ServerOptions::export_root, "ExportLibrary writes only below this folder (empty: ExportLibrary refused)"},
    {"fleet.enabled", &ServerOptions::fleet_enabled, "measure on fleet workers (anvil worker) instead of this node's GPU"},
    {"fleet.lease_seconds", &ServerOptions::fleet_lease_seconds, "a task lease not renewed for this long is leased again"},
    {"fleet.heartbeat_seconds", &ServerOptions::fleet_heartbeat_seconds, "workers heartbeat this often (below fleet.lease_seconds)"},
    {"fleet.quarantine_after", &ServerOptions::fleet_quarantine_after, "consecutive infrastructure failures that quarantine a worker"},
    {"fleet.artifact_dir", &ServerOptions::fleet_artifact_dir, "built artifacts by SHA-256 (empty: <server.db>.artifacts)"},
    {"fleet.gpu", &ServerOptions::fleet_gpu, "GPU model fleet jobs measure on (empty: the GPU workers')"},
    {"fleet.enrolment_token_file", &ServerOptions::fleet_enrolment_token_file, "file holding the token workers register with (empty: auth.token_file's)"},
    {"fleet.worker_wait_seconds", &ServerOptions::fleet_worker_wait_seconds, "a job waits this long for a live worker able to take its tasks"},
    {"fleet.cross_check_tolerance", &ServerOptions::fleet_cross_check_tolerance, "a re-check on another GPU off by more than this fraction verifies nothing"},
};

const Entry* Find(const std::string& name) {
  for (const Entry& e : kTable) {
    if (name == e.name) return &e;
  }
  return nullptr;
}

std::string EnvName(const std::string& name) {
  return absl::AsciiStrToUpper(absl::StrCat("ANVIL_", absl::StrReplaceAll(name, {{".", "_"}})));
}

std::string DefaultText(const Field& f) {
  const ServerOptions d;
  return std::visit([&](auto member) {
    const auto& v = d.*member;
    using T = std::decay_t<decltype(v)>;
    if constexpr (std::is_same_v<T, std::string>) return v;
    else if constexpr (std::is_same_v<T, bool>) return std::string(v ? "true" : "false");
    else return absl::StrCat(v);
  }, f);
}

absl::Status SetFromText(const Entry& e, const std::string& text, ServerOptions& o) {
  auto bad = [&](const char* want) {
    return absl::InvalidArgumentError(absl::StrCat(e.name, ": '", text, "' is not ", want));
  };
  return std::visit([&](auto member) -> absl::Status {
    auto& v = o.*member;
    using T = std::decay_t<decltype(v)>;
    if constexpr (std::is_same_v<T, std::string>) {
      v = text;
    } else if constexpr (std::is_same_v<T, bool>) {
      if (!absl::SimpleAtob(text, &v)) return bad("true or false");
    } else if constexpr (std::is_same_v<T, int>) {
      if (!absl::SimpleAtoi(text, &v)) return bad("an integer");
    } else {
      if (!absl::SimpleAtod(text, &v)) return bad("a number");
    }
    return absl::OkStatus();
  }, e.field);
}

absl::Status SetFromToml(const Entry& e, const toml::node& node, ServerOptions& o) {
  const auto& src = node.source();
  auto bad = [&](const char* want) {
    return absl::InvalidArgumentError(absl::StrCat(*src.path, ":", src.begin.line, ": ", e.name,
                                                   " must be ", want));
  };
  return std::visit([&](auto member) -> absl::Status {
    auto& v = o.*member;
    using T = std::decay_t<decltype(v)>;
    if constexpr (std::is_same_v<T, std::string>) {
      if (!node.is_string()) return bad("a string");
      v = *node.value<std::string>();
    } else if constexpr (std::is_same_v<T, bool>) {
      if (!node.is_boolean()) return bad("true or false");
      v = *node.value<bool>();
    } else if constexpr (std::is_same_v<T, int>) {
      if (!node.is_integer()) return bad("an integer");
      v = static_cast<int>(*node.value<int64_t>());
    } else {
      if (!node.is_number()) return bad("a number");
      v = *node.value<double>();
    }
    return absl::OkStatus();
  }, e.field);
}

}  // namespace

std::vector<ServerOptionInfo> ListServerOptions() {
  std::vector<ServerOptionInfo> out;
  for (const Entry& e : kTable) out.push_back({e.name, e.help, DefaultText(e.field)});
  return out;
}

absl::Status ApplyConfigFile(const std::string& path, ServerOptions& options) {
  toml::table parsed;
  try {  // toml++ reports errors by exception; they stop here
    parsed = toml::parse_file(path);
  } catch (const toml::parse_error& err) {
    if (err.source().begin.line == 0) return absl::NotFoundError(absl::StrCat("cannot read config file ", path));
    return absl::InvalidArgumentError(absl::StrCat(path, ":", err.source().begin.line, ": ",
                                                   std::string(err.description())));
  }
  for (const auto& [section, table] : parsed) {
    if (!table.is_table()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": '", std::string(section.str()),
                                                     "' must be a [section] (see server/CONFIG.md)"));
    }
    for (const auto& [key, node] : *table.as_table()) {
      const std::string name = absl::StrCat(std::string(section.str()), ".", std::string(key.str()));
      const Entry* e = Find(name);
      if (e == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(path, ":", node.source().begin.line,
                                                       ": unknown option ", name));
      }
      if (absl::Status st = SetFromToml(*e, node, options); !st.ok()) return st;
    }
  }
  return absl::OkStatus();
}

absl::Status ApplyEnvironment(const std::map<std::string, std::string>& env, ServerOptions& options) {
  for (const Entry& e : kTable) {
    auto it = env.find(EnvName(e.name));
    if (it == env.end()) continue;
    if (absl::Status st = SetFromText(e, it->second, options); !st.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("$", it->first, ": ", st.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status ApplyOption(const std::string& name, const std::string& value, ServerOptions& options) {
  const Entry* e = Find(name);
  if (e == nullptr) return absl::InvalidArgumentError(absl::StrCat("unknown option ", name));
  return SetFromText(*e, value, options);
}

JobOptions JobOptionsOf(const ServerOptions& o) {
  JobOptions j;
  j.default_figure = o.default_figure;
  j.build_chunk = o.build_chunk;
  j.measure_batch = o.measure_batch;
  j.cross_check_tolerance = o.fleet_cross_check_tolerance;
  j.quarantine_after = o.fleet_quarantine_after;
  j.default_budget.set_max_wall_seconds(o.default_wall_seconds);
  j.default_budget.set_max_gpu_seconds(o.default_gpu_seconds);
  j.default_budget.set_max_candidates(o.default_candidates);
  j.default_budget.set_plateau_candidates(o.default_plateau_candidates);
  j.default_budget.set_target_efficiency(o.default_target_efficiency);
  return j;
}

absl::Status ValidateServerOptions(const ServerOptions& o) {
  auto bad = [](const std::string& why) { return absl::InvalidArgumentError(why); };
  if (o.listen.rfind(':') == std::string::npos) return bad("server.listen must be host:port");
  if (o.cert_file.empty() != o.key_file.empty()) {
    return bad("tls.cert_file and tls.key_file go together (both or neither)");
  }
  if (o.executor_threads < 1 || o.max_active_jobs < 1 || o.max_problems_per_job < 1 ||
      o.max_watchers < 1 || o.build_chunk < 1 || o.measure_batch < 1) {
    return bad("server.executor_threads, jobs.max_active_jobs, jobs.max_problems_per_job, "
               "jobs.max_watchers, jobs.build_chunk and jobs.measure_batch must be at least 1");
  }
  if (!IsFigure(o.default_figure)) {
    return bad("jobs.default_figure must be one of " + FigureList());
  }
  for (double x : {o.drain_seconds, o.default_wall_seconds, o.default_gpu_seconds, o.default_plateau_candidates,
                   o.default_target_efficiency, o.fleet_lease_seconds, o.fleet_heartbeat_seconds,
                   o.fleet_worker_wait_seconds, o.fleet_cross_check_tolerance}) {
    if (!std::isfinite(x) || x < 0) return bad("every number of seconds, budget and fraction must be finite and >= 0");
  }
  if (!(o.fleet_lease_seconds > 0) || !(o.fleet_heartbeat_seconds > 0) ||
      o.fleet_heartbeat_seconds >= o.fleet_lease_seconds || o.fleet_quarantine_after < 1) {
    return bad("fleet: need 0 < heartbeat_seconds < lease_seconds and quarantine_after >= 1");
  }
  if (!(o.fleet_cross_check_tolerance > 0)) return bad("fleet.cross_check_tolerance must be above 0");
  if (o.max_receive_message_bytes < 1024 || o.max_send_message_bytes < 1024) {
    return bad("limits.*_message_bytes must be at least 1024");
  }
  if (!(o.drain_seconds > 0)) return bad("server.drain_seconds must be positive");
  return absl::OkStatus();
}

bool IsLoopbackAddress(const std::string& listen) {
  if (absl::StartsWith(listen, "unix:")) return true;
  const size_t colon = listen.rfind(':');
  std::string host = colon == std::string::npos ? listen : listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return host == "localhost" || host == "::1" || absl::StartsWith(host, "127.");
}

std::map<std::string, std::string> ProcessEnvironment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::pair<std::string, std::string> kv = absl::StrSplit(*e, absl::MaxSplits('=', 1));
    env.insert(std::move(kv));
  }
  return env;
}

}  // namespace anvil
