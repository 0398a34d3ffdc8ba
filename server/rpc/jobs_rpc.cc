// WatchJob, GetJob, ListJobs, CancelJob: jobs by id, through the JobService.
#include "server/job_service.h"
#include "server/rpc/requests.h"
#include "server/rpc/service.h"

namespace anvil::rpc {

grpc::ServerWriteReactor<v1::JobProgress>* KernelSearchService::WatchJob(
    grpc::CallbackServerContext* context, const v1::WatchJobRequest* request) {
  return Stream(context, "WatchJob", ValidateJobId(request->job_id()),
                [request]() -> absl::StatusOr<std::string> { return request->job_id(); });
}

grpc::ServerUnaryReactor* KernelSearchService::GetJob(grpc::CallbackServerContext* context,
                                                      const v1::GetJobRequest* request,
                                                      v1::Job* response) {
  return Unary(context, "GetJob", ValidateJobId(request->job_id()), [this, request, response] {
    absl::StatusOr<v1::Job> job = deps_.jobs->GetJob(request->job_id());
    if (!job.ok()) return job.status();
    *response = *std::move(job);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* KernelSearchService::ListJobs(grpc::CallbackServerContext* context,
                                                        const v1::ListJobsRequest* request,
                                                        v1::ListJobsResponse* response) {
  absl::Status check;
  if (request->limit() < 0 || request->limit() > 10000 || !v1::JobState_IsValid(request->state())) {
    check = absl::InvalidArgumentError("limit must be in [0, 10000] (0: 100) and state a JobState");
  }
  return Unary(context, "ListJobs", check, [this, request, response] {
    absl::StatusOr<std::vector<v1::Job>> jobs =
        deps_.jobs->ListJobs(request->limit() == 0 ? 100 : request->limit(), request->state());
    if (!jobs.ok()) return jobs.status();
    for (v1::Job& j : *jobs) *response->add_jobs() = std::move(j);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* KernelSearchService::CancelJob(grpc::CallbackServerContext* context,
                                                         const v1::CancelJobRequest* request,
                                                         v1::Job* response) {
  return Unary(context, "CancelJob", ValidateJobId(request->job_id()), [this, request, response] {
    absl::StatusOr<v1::Job> job = deps_.jobs->CancelJob(request->job_id());
    if (!job.ok()) return job.status();
    *response = *std::move(job);
    return absl::OkStatus();
  });
}

}  // namespace anvil::rpc
