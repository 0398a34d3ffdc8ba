// OptimizeKernel: check the request, create the job (or find the one its
// request id made before), start it, and stream its progress. Closing the
// stream leaves the job running.
#include "absl/strings/str_cat.h"
#include "server/job_service.h"
#include "server/rpc/requests.h"
#include "server/rpc/service.h"

namespace anvil::rpc {

// UNAVAILABLE for a problem naming a GPU model this server does not measure
// on, or a job that can never run here (a fleet no GPU worker ever joined).
absl::Status KernelSearchService::CheckGpu(const v1::OptimizeKernelRequest& request) {
  if (deps_.can_run) {
    if (absl::Status st = deps_.can_run(""); !st.ok()) return st;
    for (const v1::Problem& p : request.problems()) {
      if (absl::Status st = deps_.can_run(p.gpu()); !st.ok()) return st;
    }
    return absl::OkStatus();
  }
  const std::string here = deps_.gpu ? deps_.gpu() : "";
  if (here.empty()) return absl::OkStatus();
  for (const v1::Problem& p : request.problems()) {
    if (!p.gpu().empty() && p.gpu() != here) {
      return absl::UnavailableError(absl::StrCat("no evaluator for GPU ", p.gpu(),
                                                 " on this server (it measures on ", here, ")"));
    }
  }
  return absl::OkStatus();
}

// RESOURCE_EXHAUSTED once jobs.max_active_jobs jobs are queued or running.
absl::Status KernelSearchService::CheckCapacity() {
  int active = 0;
  for (v1::JobState s : {v1::JOB_STATE_QUEUED, v1::JOB_STATE_RUNNING}) {
    absl::StatusOr<std::vector<v1::Job>> jobs = deps_.jobs->ListJobs(deps_.options->max_active_jobs, s);
    if (!jobs.ok()) return jobs.status();
    active += static_cast<int>(jobs->size());
  }
  if (active >= deps_.options->max_active_jobs) {
    return absl::ResourceExhaustedError(absl::StrCat(
        active, " jobs are queued or running (jobs.max_active_jobs); retry when one ends"));
  }
  return absl::OkStatus();
}

grpc::ServerWriteReactor<v1::JobProgress>* KernelSearchService::OptimizeKernel(
    grpc::CallbackServerContext* context, const v1::OptimizeKernelRequest* request) {
  absl::Status check = ValidateOptimizeRequest(*request, *deps_.options);
  if (check.ok() && draining()) {
    check = absl::UnavailableError("the server is shutting down and takes no new jobs; retry on its successor");
  }
  if (check.ok() && !deps_.no_evaluator_reason.empty()) {
    check = absl::UnavailableError(absl::StrCat("this server cannot measure kernels: ",
                                                deps_.no_evaluator_reason));
  }
  auto find = [this, request]() -> absl::StatusOr<std::string> {
    if (absl::Status st = CheckGpu(*request); !st.ok()) return st;
    if (!request->resume_job_id().empty()) return request->resume_job_id();
    if (absl::Status st = CheckCapacity(); !st.ok()) return st;
    absl::StatusOr<v1::Job> job = deps_.jobs->CreateJob(*request, request->request_id());
    if (!job.ok()) return job.status();
    return job->id();
  };
  // A replay (or a resume) finds its job running or ended: watching it is the answer.
  auto start = [this](const std::string& job_id) -> absl::Status {
    absl::Status started = deps_.jobs->StartJob(job_id);
    if (started.ok() && deps_.job_started) deps_.job_started(job_id);
    return started.ok() || absl::IsFailedPrecondition(started) ? absl::OkStatus() : started;
  };
  return Stream(context, "OptimizeKernel", check, find, start);
}

}  // namespace anvil::rpc
