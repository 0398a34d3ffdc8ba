// KernelSearchService: the KernelSearch RPCs (callback API) over a JobService
// and the store. Internal to server/rpc (gRPC types appear here); the public
// handle is server/rpc/server.h. One .cc per RPC group:
//   service.cc       construction, auth, the unary-call helper, draining
//   optimize_rpc.cc  OptimizeKernel (create or replay, start, stream)
//   progress_stream.cc  the stream behind OptimizeKernel and WatchJob
//   jobs_rpc.cc      WatchJob, GetJob, ListJobs, CancelJob
//   kernels_rpc.cc   ListKernels, GetKernel
//   export_rpc.cc    ExportLibrary
// Handlers never block: each checks auth and the request on the gRPC thread,
// then hands its work to the executor; streams are fed by job events.
// Thread-safe.
#ifndef ANVIL_SERVER_RPC_SERVICE_H_
#define ANVIL_SERVER_RPC_SERVICE_H_

#include <functional>
#include <memory>
#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "anvil/v1/kernel_search.grpc.pb.h"
#include "server/rpc/auth.h"
#include "server/rpc/executor.h"
#include "server/rpc/metrics.h"
#include "server/rpc/options.h"

namespace anvil {
class JobService;
class Store;
class Watch;
}  // namespace anvil

namespace anvil::rpc {

class ProgressStream;

struct ServiceDeps {  // not owned; each outlives the service
  const ServerOptions* options = nullptr;
  Store* store = nullptr;
  JobService* jobs = nullptr;
  Executor* executor = nullptr;
  ServerMetrics* metrics = nullptr;
  const TokenAuth* auth = nullptr;
  // Called with each job the service starts, so the server can watch it for metrics.
  std::function<void(const std::string& job_id)> job_started;
  std::string no_evaluator_reason;  // non-empty: OptimizeKernel is UNAVAILABLE
  std::function<std::string()> gpu;  // the GPU measured on, "" while unknown (ServerParts::gpu)
  std::function<absl::Status(const std::string& gpu)> can_run;  // ServerParts::can_run
};

class KernelSearchService final : public v1::KernelSearch::CallbackService {
 public:
  explicit KernelSearchService(ServiceDeps deps) : deps_(std::move(deps)) {}

  grpc::ServerWriteReactor<v1::JobProgress>* OptimizeKernel(
      grpc::CallbackServerContext* context, const v1::OptimizeKernelRequest* request) override;
  grpc::ServerWriteReactor<v1::JobProgress>* WatchJob(
      grpc::CallbackServerContext* context, const v1::WatchJobRequest* request) override;
  grpc::ServerUnaryReactor* GetJob(grpc::CallbackServerContext* context,
                                   const v1::GetJobRequest* request, v1::Job* response) override;
  grpc::ServerUnaryReactor* ListJobs(grpc::CallbackServerContext* context,
                                     const v1::ListJobsRequest* request,
                                     v1::ListJobsResponse* response) override;
  grpc::ServerUnaryReactor* CancelJob(grpc::CallbackServerContext* context,
                                      const v1::CancelJobRequest* request,
                                      v1::Job* response) override;
  grpc::ServerUnaryReactor* ListKernels(grpc::CallbackServerContext* context,
                                        const v1::ListKernelsRequest* request,
                                        v1::ListKernelsResponse* response) override;
  grpc::ServerUnaryReactor* GetKernel(grpc::CallbackServerContext* context,
                                      const v1::GetKernelRequest* request,
                                      v1::Kernel* response) override;
  grpc::ServerUnaryReactor* ExportLibrary(grpc::CallbackServerContext* context,
                                          const v1::ExportLibraryRequest* request,
                                          v1::ExportLibraryResponse* response) override;

  // Draining: new OptimizeKernel calls get UNAVAILABLE from now on.
  void StopAccepting();
  bool draining();
  // Ends every open progress stream with UNAVAILABLE (the jobs go on or are
  // checkpointed; clients re-attach with WatchJob).
  void CloseStreams();

 private:
  friend class ProgressStream;
  // The unary pattern: auth and `check` on the gRPC thread, then `work` on
  // the executor (skipped when the call was cancelled or its deadline passed
  // while queued), its status mapped by ToGrpc.
  grpc::ServerUnaryReactor* Unary(grpc::CallbackServerContext* context, const char* method,
                                  const absl::Status& check, std::function<absl::Status()> work);
  // A progress stream. On the executor: `find` returns the job id to watch
  // (OptimizeKernel creates the job), the stream watches it, then `start`
  // (if any) starts it, so no event of the job is missed.
  grpc::ServerWriteReactor<v1::JobProgress>* Stream(
      grpc::CallbackServerContext* context, const char* method, const absl::Status& check,
      std::function<absl::StatusOr<std::string>()> find,
      std::function<absl::Status(const std::string& job_id)> start = nullptr);
  absl::Status CheckCapacity();
  absl::Status CheckGpu(const v1::OptimizeKernelRequest& request);
  absl::Status Admit(const grpc::CallbackServerContext& context) const;  // auth + draining
  bool Register(ProgressStream* s);    // false when at jobs.max_watchers or draining
  // A stream is done: unregistered, counted, its watch released on the executor.
  void StreamDone(ProgressStream* s, const char* method, grpc::StatusCode code,
                  std::shared_ptr<Watch> watch);

  ServiceDeps deps_;
  absl::Mutex mu_;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  std::set<ProgressStream*> streams_ ABSL_GUARDED_BY(mu_);
};

}  // namespace anvil::rpc

#endif  // ANVIL_SERVER_RPC_SERVICE_H_
