// ServerOptions: every setting of `anvil serve`, and where each comes from.
// One table (kServerOptionTable in options.cc) names each option once; the
// TOML file, the environment and the command line are all read through it,
// and server/CONFIG.md documents it. Later sources override earlier ones:
//   built-in default < TOML file (--config) < ANVIL_<SECTION>_<KEY> < --<section>-<key>
// e.g. `tls.cert_file` is `[tls] cert_file = "..."`, $ANVIL_TLS_CERT_FILE and
// --tls-cert-file. Value types; no synchronisation of their own.
#ifndef ANVIL_SERVER_RPC_OPTIONS_H_
#define ANVIL_SERVER_RPC_OPTIONS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/job_options.h"

namespace anvil {

struct ServerOptions {
  // [server]
  std::string listen = "127.0.0.1:50051";  // host:port of the gRPC service; port 0 picks one
  std::string db = "anvil.db";             // the SQLite store (this process is its only writer)
  std::string port_file;                   // write the bound port here once serving (for tests)
  int executor_threads = 4;                // threads that run unary RPCs' store reads and writes
  double drain_seconds = 30;               // SIGTERM: running jobs checkpoint and the process exits
                                           // within this many seconds
  // [jobs]
  int max_active_jobs = 64;      // jobs QUEUED or RUNNING at once; beyond: RESOURCE_EXHAUSTED
  int max_problems_per_job = 256;
  std::string default_figure = "graph-cold";  // reward figure of a request that names none
  double default_wall_seconds = 3600;     // Budget.max_wall_seconds when a request leaves it 0
  double default_gpu_seconds = 0;         // Budget.max_gpu_seconds default (0: no limit)
  int default_candidates = 0;             // Budget.max_candidates default (0: no limit)
  double default_plateau_candidates = 0;  // Budget.plateau_candidates default (0: no plateau stop)
  double default_target_efficiency = 0;   // Budget.target_efficiency default (0: none)
  int build_chunk = 64;                   // candidates per build/measure round
  int measure_batch = 64;                 // screens per runner process, in (candidate, problem) items
  std::string llm_config;                 // LLM endpoint JSON: jobs run the LLM proposer too
  int max_watchers = 1024;       // open OptimizeKernel/WatchJob streams: RESOURCE_EXHAUSTED beyond
  // [limits]
  int max_receive_message_bytes = 4 << 20;  // largest request accepted
  int max_send_message_bytes = 64 << 20;    // largest response sent (a kernel with its samples)
  // [keepalive] (gRPC channel arguments; see server/CONFIG.md)
  int keepalive_time_ms = 60000;              // ping an idle connection this often
  int keepalive_timeout_ms = 20000;           // close it when a ping goes unanswered this long
  int min_client_ping_interval_ms = 10000;    // clients pinging more often get GOAWAY
  bool permit_keepalive_without_calls = true; // clients may ping with no call open (watch clients)
  // [auth]
  std::string token_file;  // bearer token clients must send; empty with no $ANVIL_AUTH_TOKEN: off
  // Serve a non-loopback address (server.listen, metrics.listen) with no
  // token: refused at start unless this is set.
  bool allow_unauthenticated = false;
  // [tls]
  std::string cert_file;   // PEM certificate chain; with key_file: TLS instead of plaintext
  std::string key_file;    // PEM private key
  // [metrics]
  std::string metrics_listen;  // host:port of the Prometheus /metrics endpoint; empty: off
  // [export]
  std::string export_root;     // ExportLibrary writes only below this folder; empty: refused
  // [fleet] (server/fleet/FLEET.md)
  bool fleet_enabled = false;         // measure on fleet workers (anvil worker), not this node's GPU
  double fleet_lease_seconds = 30;    // a task lease not renewed for this long goes back to the queue
  double fleet_heartbeat_seconds = 5; // workers heartbeat this often (< lease_seconds)
  int fleet_quarantine_after = 3;     // consecutive infrastructure failures that quarantine a worker
  std::string fleet_artifact_dir;     // built artifacts by SHA-256; empty: <db>.artifacts
  std::string fleet_gpu;              // the GPU model jobs measure on; empty: the first worker's
  // The token workers register with (RegisterWorker); empty: auth.token_file's.
  std::string fleet_enrolment_token_file;
  double fleet_worker_wait_seconds = 600;  // a job waits this long for a live worker able to take its tasks
  // A re-check on another GPU whose figure differs from the original's by
  // more than this fraction does not verify, and records a disagreement.
  double fleet_cross_check_tolerance = 0.25;
};

// Whether a listen address ("host:port") is reachable only from this host.
bool IsLoopbackAddress(const std::string& listen);

// One option as the table names it: "section.key", its help text and the
// text form of its default.
struct ServerOptionInfo {
  std::string name;
  std::string help;
  std::string default_text;
};
// The jobs' part of the options (figure, budget defaults, build chunk,
// cross-check), as every job service is given it: `anvil serve`'s and local
// `anvil optimize`'s alike (server/proposers/job_setup.h).
JobOptions JobOptionsOf(const ServerOptions& o);

std::vector<ServerOptionInfo> ListServerOptions();

// Applies a TOML file. InvalidArgument names the file, line and key for a
// syntax error, an unknown key or a value of the wrong type; NotFound when the
// file is missing.
absl::Status ApplyConfigFile(const std::string& path, ServerOptions& options);
// Applies $ANVIL_<SECTION>_<KEY> for every option set in `env`.
absl::Status ApplyEnvironment(const std::map<std::string, std::string>& env,
                              ServerOptions& options);
// Applies one option by its table name from text ("tls.cert_file", "PATH").
absl::Status ApplyOption(const std::string& name, const std::string& value,
                         ServerOptions& options);
// Rejects impossible combinations (a cert without a key, a port out of range...).
absl::Status ValidateServerOptions(const ServerOptions& options);
// The process environment as a map (for ApplyEnvironment).
std::map<std::string, std::string> ProcessEnvironment();

}  // namespace anvil

#endif  // ANVIL_SERVER_RPC_OPTIONS_H_
