// KernelSearchClient: the KernelSearch service seen from a client (the `anvil`
// CLI with --server, tests, the load program). No gRPC types here.
// Unary calls carry a deadline (options.timeout); streams carry none (a job
// may run for hours) unless options.stream_timeout is set.
// Thread-safe: one client may serve many threads (one channel, multiplexed).
#ifndef ANVIL_SERVER_RPC_CLIENT_H_
#define ANVIL_SERVER_RPC_CLIENT_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "anvil/v1/fleet.pb.h"
#include "anvil/v1/kernel_search.pb.h"

namespace anvil {

struct ClientOptions {
  std::string target;          // host:port
  std::string token;           // bearer token; empty: none sent
  bool tls = false;            // TLS instead of plaintext
  std::string ca_file;         // PEM roots for TLS; empty: the system's
  absl::Duration timeout = absl::Seconds(30);         // unary calls
  absl::Duration stream_timeout = absl::InfiniteDuration();  // OptimizeKernel, WatchJob
};

// Called with each progress event; return false to stop reading (the job goes on).
using ProgressHandler = std::function<bool(const v1::JobProgress& progress)>;

class KernelSearchClient {
 public:
  static absl::StatusOr<std::unique_ptr<KernelSearchClient>> Connect(const ClientOptions& options);
  ~KernelSearchClient();

  // Stream until the job ends (OK), the handler returns false (OK), or the
  // stream fails (its status: UNAVAILABLE when the server drains...).
  absl::Status OptimizeKernel(const v1::OptimizeKernelRequest& request, const ProgressHandler& on);
  absl::Status WatchJob(const std::string& job_id, const ProgressHandler& on);
  absl::StatusOr<v1::Job> GetJob(const std::string& job_id);
  absl::StatusOr<v1::ListJobsResponse> ListJobs(const v1::ListJobsRequest& request);
  absl::StatusOr<v1::Job> CancelJob(const std::string& job_id);
  absl::StatusOr<v1::ListKernelsResponse> ListKernels(const v1::ListKernelsRequest& request);
  absl::StatusOr<v1::Kernel> GetKernel(const v1::GetKernelRequest& request);
  absl::StatusOr<v1::ExportLibraryResponse> ExportLibrary(const v1::ExportLibraryRequest& request);
  // The Fleet service's operator calls (UNIMPLEMENTED: the server has no fleet).
  absl::StatusOr<v1::ListWorkersResponse> ListWorkers();
  absl::StatusOr<v1::WorkerStatus> ClearQuarantine(const std::string& worker_id);
  // grpc.health.v1 Check for the KernelSearch service: true when SERVING.
  absl::StatusOr<bool> Serving();

 private:
  struct Impl;
  explicit KernelSearchClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace anvil

#endif  // ANVIL_SERVER_RPC_CLIENT_H_
