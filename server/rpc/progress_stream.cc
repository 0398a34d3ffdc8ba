#include "server/rpc/progress_stream.h"

#include "absl/strings/str_cat.h"
#include "server/rpc/progress.h"
#include "server/rpc/service.h"
#include "proto/grpc_status.h"

namespace anvil::rpc {
namespace {

bool Terminal(v1::JobState s) {
  return s == v1::JOB_STATE_SUCCEEDED || s == v1::JOB_STATE_FAILED || s == v1::JOB_STATE_CANCELLED;
}

}  // namespace

ProgressStream::ProgressStream(KernelSearchService* service, const char* method)
    : service_(service), method_(method), link_(std::make_shared<Link>()) {
  absl::MutexLock lock(&link_->mu);
  link_->stream = this;
}

void ProgressStream::Attach(JobService& jobs, const std::string& job_id,
                            const std::function<absl::Status(const std::string&)>& start) {
  absl::StatusOr<std::unique_ptr<Watch>> watch =
      jobs.WatchJob(job_id, [link = link_](const JobEvent& event) {
        absl::MutexLock lock(&link->mu);
        if (link->stream != nullptr) link->stream->Push(event);
      });
  // No end can be missed: JobService delivers a job's final state to every
  // watch exactly once, however close to the end the watch was set up.
  absl::Status started = watch.ok() && start ? start(job_id) : absl::OkStatus();
  absl::MutexLock lock(&mu_);
  attaching_ = false;
  if (!watch.ok() || !started.ok()) {
    if (!finish_) finish_ = ToGrpc(watch.ok() ? started : watch.status());
    if (watch.ok()) watch_ = *std::move(watch);  // released in OnDone
  } else {
    watch_ = *std::move(watch);
  }
  WriteNextLocked();
}

void ProgressStream::Close(const grpc::Status& status) {
  absl::MutexLock lock(&mu_);
  attaching_ = false;
  if (!finish_) finish_ = status;
  MaybeFinishLocked();
}

void ProgressStream::Push(const JobEvent& event) {
  absl::MutexLock lock(&mu_);
  if (finish_ || job_ended_) return;
  const bool droppable = event.kind == JobEventKind::kMeasured || event.kind == JobEventKind::kLog;
  if (droppable && queue_.size() >= kMaxQueued) {
    ++dropped_;
    return;
  }
  v1::JobProgress p = ToProgress(event);
  if (dropped_ > 0) {
    p.set_message(absl::StrCat(p.message(), " (", dropped_,
                               " earlier progress events dropped: the client read too slowly)"));
    dropped_ = 0;
  }
  if (event.kind == JobEventKind::kState && Terminal(event.job.state())) job_ended_ = true;
  queue_.push_back(std::move(p));
  WriteNextLocked();
}

void ProgressStream::WriteNextLocked() {
  if (writing_ || finished_) return;
  if (finish_ || queue_.empty()) return MaybeFinishLocked();
  writing_msg_ = std::move(queue_.front());
  queue_.pop_front();
  writing_ = true;
  StartWrite(&writing_msg_);
}

void ProgressStream::MaybeFinishLocked() {
  if (finished_ || writing_ || attaching_) return;
  if (finish_) {
    finished_ = true;
    Finish(*finish_);
  } else if (job_ended_ && queue_.empty()) {
    finished_ = true;
    Finish(grpc::Status::OK);
  }
}

void ProgressStream::OnWriteDone(bool ok) {
  absl::MutexLock lock(&mu_);
  writing_ = false;
  if (!ok && !finish_) finish_ = grpc::Status(grpc::StatusCode::CANCELLED, "the client went away");
  WriteNextLocked();
}

void ProgressStream::OnCancel() {
  absl::MutexLock lock(&mu_);
  if (!finish_) {
    finish_ = grpc::Status(grpc::StatusCode::CANCELLED,
                           "stream closed by the client or its deadline; the job goes on");
  }
  MaybeFinishLocked();
}

void ProgressStream::OnDone() {
  {
    absl::MutexLock lock(&link_->mu);
    link_->stream = nullptr;  // the job's thread no longer reaches this stream
  }
  std::shared_ptr<Watch> watch;
  grpc::StatusCode code = grpc::StatusCode::OK;
  {
    absl::MutexLock lock(&mu_);
    watch = std::move(watch_);
    if (finish_) code = finish_->error_code();
  }
  service_->StreamDone(this, method_, code, std::move(watch));
  delete this;
}

}  // namespace anvil::rpc
