// OptimizeKernel: check the request, create the job (or find the one its
// request id made before), start it, and stream its progress. Closing the
// stream leaves the job running.
#include "server/job_service.h"
#include "server/rpc/requests.h"
#include "server/rpc/service.h"

namespace anvil::rpc {

grpc::ServerWriteReactor<v1::JobProgress>* KernelSearchService::OptimizeKernel(
    grpc::CallbackServerContext* context, const v1::OptimizeKernelRequest* request) {
  absl::Status check = ValidateOptimizeRequest(*request, *deps_.options);
  if (check.ok() && draining()) {
    check = absl::UnavailableError("the server is shutting down and takes no new jobs; retry on its successor");
  }
  return Stream(context, "OptimizeKernel", check, [this, request]() -> absl::StatusOr<std::string> {
    std::string job_id = request->resume_job_id();
    if (job_id.empty()) {
      absl::StatusOr<v1::Job> job = deps_.jobs->CreateJob(*request, request->request_id());
      if (!job.ok()) return job.status();
      job_id = job->id();
    }
    // A replay (or a resume) finds its job running or ended: watching it is the answer.
    absl::Status started = deps_.jobs->StartJob(job_id);
    if (started.ok()) {
      if (deps_.job_started) deps_.job_started(job_id);
    } else if (!absl::IsFailedPrecondition(started)) {
      return started;
    }
    return job_id;
  });
}

}  // namespace anvil::rpc
