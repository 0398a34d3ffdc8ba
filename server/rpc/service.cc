// KernelSearchService: admission (auth, draining), the unary-call helper and
// the stream bookkeeping shared by every RPC.
#include "server/rpc/service.h"

#include "server/job_service.h"
#include "server/rpc/progress_stream.h"
#include "proto/grpc_status.h"

namespace anvil::rpc {
namespace {

std::string CodeName(grpc::StatusCode code) {
  return absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
}

// Work queued behind others may find its caller gone or out of time.
absl::Status StillWanted(const grpc::CallbackServerContext& context) {
  if (context.IsCancelled()) return absl::CancelledError("the call was cancelled while queued");
  if (context.deadline() < std::chrono::system_clock::now()) {
    return absl::DeadlineExceededError("the call's deadline passed while it was queued");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status KernelSearchService::Admit(const grpc::CallbackServerContext& context) const {
  return deps_.auth->Check(context);
}

grpc::ServerUnaryReactor* KernelSearchService::Unary(grpc::CallbackServerContext* context,
                                                     const char* method, const absl::Status& check,
                                                     std::function<absl::Status()> work) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::Status admitted = Admit(*context);
  if (admitted.ok()) admitted = check;
  if (!admitted.ok()) {
    deps_.metrics->RpcFinished(method, CodeName(static_cast<grpc::StatusCode>(admitted.code())));
    reactor->Finish(ToGrpc(admitted));
    return reactor;
  }
  deps_.executor->Submit([this, context, reactor, method, work = std::move(work)] {
    absl::Status st = StillWanted(*context);
    if (st.ok()) st = work();
    deps_.metrics->RpcFinished(method, CodeName(static_cast<grpc::StatusCode>(st.code())));
    reactor->Finish(ToGrpc(st));
  });
  return reactor;
}

grpc::ServerWriteReactor<v1::JobProgress>* KernelSearchService::Stream(
    grpc::CallbackServerContext* context, const char* method, const absl::Status& check,
    std::function<absl::StatusOr<std::string>()> find,
    std::function<absl::Status(const std::string& job_id)> start) {
  auto* stream = new ProgressStream(this, method);
  deps_.metrics->StreamOpened();
  absl::Status admitted = Admit(*context);
  if (admitted.ok()) admitted = check;
  if (admitted.ok() && !Register(stream)) {
    admitted = absl::ResourceExhaustedError(
        "too many open progress streams (jobs.max_watchers), or the server is draining; "
        "poll with GetJob or retry later");
  }
  if (!admitted.ok()) {
    stream->Close(ToGrpc(admitted));
    return stream;
  }
  deps_.executor->Submit([this, context, stream, find = std::move(find), start = std::move(start)] {
    const absl::Status wanted = StillWanted(*context);
    absl::StatusOr<std::string> job_id = wanted.ok() ? find() : absl::StatusOr<std::string>(wanted);
    if (!job_id.ok()) return stream->Close(ToGrpc(job_id.status()));
    stream->Attach(*deps_.jobs, *job_id, start);
  });
  return stream;
}

bool KernelSearchService::Register(ProgressStream* s) {
  absl::MutexLock lock(&mu_);
  if (draining_ || static_cast<int>(streams_.size()) >= deps_.options->max_watchers) return false;
  streams_.insert(s);
  return true;
}

void KernelSearchService::StreamDone(ProgressStream* s, const char* method, grpc::StatusCode code,
                                     std::shared_ptr<Watch> watch) {
  {
    absl::MutexLock lock(&mu_);
    streams_.erase(s);
  }
  deps_.metrics->StreamClosed();
  deps_.metrics->RpcFinished(method, CodeName(code));
  // Releasing a watch may wait for the job's thread: not on a gRPC thread.
  if (watch) deps_.executor->Submit([watch = std::move(watch)]() mutable { watch.reset(); });
}

void KernelSearchService::StopAccepting() {
  absl::MutexLock lock(&mu_);
  draining_ = true;
}

bool KernelSearchService::draining() {
  absl::MutexLock lock(&mu_);
  return draining_;
}

void KernelSearchService::CloseStreams() {
  absl::MutexLock lock(&mu_);
  for (ProgressStream* s : streams_) {
    s->Close(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          "the server is shutting down; its jobs resume when it restarts "
                          "(re-attach with WatchJob)"));
  }
}

}  // namespace anvil::rpc
