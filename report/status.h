// Status page: what `anvil serve` shows a person on its HTTP port: jobs with
// live progress, workers with their GPUs, leases and health, the latest
// winners. One HTML page (report/status.html) polls a JSON model of the
// coordinator's state every two seconds; both are read-only.
//
// Integration (the HTTP server owns the socket; this module owns the page):
//   StatusResponse r = HandleStatusRequest(request, store, snapshot_fn, authorized);
// for GET /status, /status/ and /status.json; any other path is the caller's.
// `anvil serve` answers them on its metrics port (server/rpc/metrics.h).
// The coordinator passes a snapshot of what only it knows (live jobs, leases);
// without one, jobs and workers are read from the store.
//
// Thread-safety: functions only; safe from any thread (the Store serialises).
#ifndef ANVIL_REPORT_STATUS_H_
#define ANVIL_REPORT_STATUS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "store/store.h"

namespace anvil::report {

// A lease: one slot of a worker busy with one candidate (a GPU ordinal for a
// measurement, -1 for a build).
struct LeaseInfo {
  std::string worker_id;
  int32_t gpu_ordinal = 0;
  std::string job_id;
  std::string candidate;        // name or id
  int64_t since_unix_ms = 0;
  int64_t deadline_unix_ms = 0;  // when it expires without a heartbeat
};

// The coordinator's state at one moment. Fields left empty are read from the store.
struct StatusSnapshot {
  std::vector<v1::Job> jobs;            // empty: the store's latest jobs
  std::vector<WorkerRecord> workers;    // empty: the store's workers
  std::vector<LeaseInfo> leases;        // empty: the store's leased tasks (the fleet's queue)
  int64_t now_unix_ms = 0;              // 0: the system clock
  double heartbeat_timeout_s = 30;      // a worker silent this long is unhealthy
};

struct StatusOptions {
  int max_jobs = 20;     // newest jobs shown
  int max_winners = 12;  // newest winners shown
};

// The page's JSON model (format: report/REPORT.md, "Status model").
absl::StatusOr<nlohmann::json> BuildStatusModel(Store& store, const StatusSnapshot& snapshot,
                                                const StatusOptions& options = {});

// The page itself (static: it fetches status.json beside its own URL).
std::string StatusPageHtml();

struct StatusRequest {
  std::string method = "GET";
  std::string path;           // without the query, e.g. "/status.json"
  std::string query;          // after '?', e.g. "token=..."
  std::string authorization;  // the Authorization header, e.g. "Bearer ..."
};
struct StatusResponse {
  int code = 404;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  bool handled = false;  // false: not a status path; the caller answers
};

// Whether an "Authorization" value ("Bearer <token>", or "" when absent)
// may read the page; empty function: everyone may.
using StatusAuthorizer = std::function<bool(const std::string& authorization)>;

// An authorizer for one token, compared in constant time; "" lets everyone in.
StatusAuthorizer BearerToken(const std::string& token);

// Answers the status paths. The token travels as "Authorization: Bearer
// <token>" or as "?token=<token>" (a browser opening the page passes it in
// the URL; the page forwards it); one the authorizer refuses is 401.
// Anything but GET/HEAD is 405.
StatusResponse HandleStatusRequest(const StatusRequest& request, Store& store,
                                   const std::function<StatusSnapshot()>& snapshot,
                                   const StatusAuthorizer& authorized);

}  // namespace anvil::report

#endif  // ANVIL_REPORT_STATUS_H_
