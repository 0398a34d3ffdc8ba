// ServerMetrics: the server's Prometheus metrics, served as text on
// http://<metrics.listen>/metrics (prometheus-cpp registry, cpp-httplib HTTP),
// with other read-only pages on the same port (the status page: `pages`).
// The HTTP threads have default-size stacks (civetweb's fixed 100 KiB ones
// could not hold the static TLS of a process that links cuBLASLt).
// What it exposes:
//   anvil_jobs{state}                       jobs in the store by state (gauge, read at scrape)
//   anvil_job_queue_depth                   jobs accepted and waiting for a slot (gauge)
//   anvil_progress_streams                  open OptimizeKernel/WatchJob streams (gauge)
//   anvil_store_bytes                       database file plus its WAL (gauge)
//   anvil_candidates_built_total{outcome}   builds (ok | failed); rate() is builds per second
//   anvil_candidates_measured_total{verdict} measurements by verdict; rate() per second
//   anvil_build_seconds / anvil_measure_seconds   latency histograms
//   anvil_reward                            histogram of rewards given
//   anvil_rpcs_total{method,code}           finished RPCs by status code
//   anvil_coordinator_overhead_seconds_total  job threads' time outside the evaluator and the
//                                           proposers (scheduling, store, rewards, events)
//   anvil_coordinator_candidates_total      candidates sent to the evaluator; the ratio of the
//                                           two rates is the coordinator's overhead per candidate
//   anvil_evaluator_wait_seconds_total      job threads' time waiting on builds and measurements
// Counters are fed by the server as events happen; gauges are read from the
// snapshot function at each scrape. Thread-safe.
#ifndef ANVIL_SERVER_RPC_METRICS_H_
#define ANVIL_SERVER_RPC_METRICS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace anvil::rpc {

struct MetricsSnapshot {
  std::map<std::string, int64_t> jobs_by_state;  // "queued", "running", ... -> count
  int64_t queue_depth = 0;
  int64_t store_bytes = 0;
};

// One HTTP GET or HEAD on the metrics port, and its answer.
struct HttpGet {
  std::string method, path, query, authorization;
};
struct HttpAnswer {
  bool handled = false;  // false: 404
  int code = 200;
  std::string content_type, body;
};
// Answers the paths it knows (called on an HTTP thread, concurrently).
using HttpPages = std::function<HttpAnswer(const HttpGet&)>;

class ServerMetrics {
 public:
  // Serves /metrics on `listen` (host:port; port 0 picks one), and any other
  // path through `pages` (may be empty); empty listen: counts without serving.
  // `snapshot` is called at each scrape, on the HTTP thread.
  static absl::StatusOr<std::unique_ptr<ServerMetrics>> Start(
      const std::string& listen, std::function<MetricsSnapshot()> snapshot, HttpPages pages = nullptr);
  ~ServerMetrics();

  int port() const;  // 0 when not serving
  void CandidateBuilt(bool ok, double seconds);
  void CandidateMeasured(const std::string& verdict, double seconds);
  void Rewarded(double value);
  // A job thread's time since its last report (server/job_events.h CoordinatorTime).
  void CoordinatorSpent(double overhead_seconds, double evaluator_seconds, int candidates);
  void RpcFinished(const std::string& method, const std::string& code);
  void StreamOpened();
  void StreamClosed();
  // The text exposition of every metric (what /metrics returns).
  std::string Text();

  struct Impl;  // metrics.cc (its HTTP handler reads it)

 private:
  explicit ServerMetrics(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<Impl> impl_;  // shared: the HTTP thread holds it during a scrape
};

// Size of a SQLite database with its -wal file, 0 for a missing file.
int64_t StoreBytes(const std::string& db_path);

}  // namespace anvil::rpc

#endif  // ANVIL_SERVER_RPC_METRICS_H_
