// Server: `anvil serve`, the KernelSearch gRPC service (proto/anvil/v1/
// kernel_search.proto) over a JobService and the store, with grpc.health.v1
// health checking, server reflection, optional bearer-token auth and TLS, and
// Prometheus metrics. Handlers never block: store reads and job creation run
// on the server's executor, searches on the JobService's threads, progress
// streams are written as the job's events arrive. server/CONFIG.md lists the
// options and limits; proto/anvil/v1/kernel_search.proto the RPC semantics;
// proto/grpc_status.h the status codes a client sees.
//
// Thread-safety: Start, Drain and Wait may be called from any thread; Drain
// at most once. REQUIRES: the store and job service outlive the Server.
#ifndef ANVIL_SERVER_RPC_SERVER_H_
#define ANVIL_SERVER_RPC_SERVER_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/rpc/options.h"

namespace anvil {

class Fleet;
class JobService;
class Store;
namespace rpc {
class ServerMetrics;
}  // namespace rpc

// What the server serves. Not owned; each outlives the Server.
struct ServerParts {
  Store* store = nullptr;
  JobService* jobs = nullptr;
  rpc::ServerMetrics* metrics = nullptr;  // MakeServerMetrics
  // Non-empty when this server has no evaluator (no GPU here): OptimizeKernel
  // answers UNAVAILABLE with it; the other RPCs work.
  std::string no_evaluator_reason;
  // The GPU model this server measures on ("" while unknown): a problem naming
  // another is refused UNAVAILABLE (no evaluator for that GPU here).
  std::function<std::string()> gpu;
  // Whether a job for problems on a GPU model ("": any) can ever run here:
  // OK, or UNAVAILABLE with why (a fleet no GPU worker ever joined). Empty:
  // the `gpu` rule alone.
  std::function<absl::Status(const std::string& gpu)> can_run;
  // The fleet whose Fleet service this server also serves (same port;
  // operators with the bearer token, workers registering with the enrolment
  // token, then with their own credentials); null: none.
  Fleet* fleet = nullptr;
};

class Server {
 public:
  // Binds options.listen (and options.metrics_listen), registers the services
  // and starts serving. Unavailable when a port cannot be bound;
  // InvalidArgument for unusable options (a TLS key that does not load...).
  // Then resumes the jobs a previous process left QUEUED or RUNNING.
  static absl::StatusOr<std::unique_ptr<Server>> Start(const ServerOptions& options,
                                                       const ServerParts& parts);
  // The metrics of a server on `options` (their endpoint serving already):
  // made before the server so the evaluator can feed them.
  static absl::StatusOr<std::unique_ptr<rpc::ServerMetrics>> MakeMetrics(const ServerOptions& options,
                                                                         Store& store);
  ~Server();  // drains with no grace when Drain was not called
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  int port() const;          // the bound gRPC port
  int metrics_port() const;  // the bound /metrics port, 0 when off

  // The SIGTERM path: health turns NOT_SERVING at once; new OptimizeKernel
  // calls get UNAVAILABLE; running jobs are checkpointed (stopped where the
  // store can resume them); open progress streams end with UNAVAILABLE
  // ("re-attach with WatchJob"); in-flight unary calls finish; gRPC stops.
  // gRPC calls still open `grace` after the call are cancelled. Stopping the
  // jobs waits for each one's round in flight; a caller with a hard deadline
  // (ServeMain) exits when it passes: the store holds every measurement, so
  // the jobs resume all the same.
  void Drain(absl::Duration grace);
  // Blocks until Drain has finished.
  void Wait();

 private:
  struct Impl;
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace anvil

#endif  // ANVIL_SERVER_RPC_SERVER_H_
