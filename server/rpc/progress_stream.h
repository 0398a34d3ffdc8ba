// ProgressStream: one OptimizeKernel or WatchJob stream. It watches a job
// through the JobService and writes each event as a v1::JobProgress, one
// write in flight at a time; the job's thread only queues (never waits on a
// slow client: past kMaxQueued queued events, further "measured" and "log"
// events are dropped and the next event says how many). The stream ends OK
// after the job's final state, CANCELLED when the client goes away (the job
// goes on), UNAVAILABLE when the server drains. Internal to server/rpc.
// Thread-safe; deletes itself in OnDone.
#ifndef ANVIL_SERVER_RPC_PROGRESS_STREAM_H_
#define ANVIL_SERVER_RPC_PROGRESS_STREAM_H_

#include <deque>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "anvil/v1/kernel_search.grpc.pb.h"
#include "server/job_events.h"
#include "server/job_service.h"

namespace anvil::rpc {

class KernelSearchService;

class ProgressStream final : public grpc::ServerWriteReactor<v1::JobProgress> {
 public:
  static constexpr int kMaxQueued = 512;

  ProgressStream(KernelSearchService* service, const char* method);
  // Watches `job_id` (on an executor thread; JobService::WatchJob reads the
  // store). Until Attach or Close the stream cannot finish (and be deleted).
  // Then calls `start` (when set); its error ends the stream.
  void Attach(JobService& jobs, const std::string& job_id,
              const std::function<absl::Status(const std::string&)>& start);
  // Ends the stream with `status` once the write in flight is done.
  void Close(const grpc::Status& status);

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  // What the job's thread sees: the stream, until it is done.
  struct Link {
    absl::Mutex mu;
    ProgressStream* stream ABSL_GUARDED_BY(mu) = nullptr;
  };
  void Push(const JobEvent& event);
  void WriteNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MaybeFinishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  KernelSearchService* const service_;
  const char* const method_;
  std::shared_ptr<Link> link_;
  absl::Mutex mu_;
  std::deque<v1::JobProgress> queue_ ABSL_GUARDED_BY(mu_);
  v1::JobProgress writing_msg_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  int dropped_ ABSL_GUARDED_BY(mu_) = 0;
  bool job_ended_ ABSL_GUARDED_BY(mu_) = false;       // the final state is queued
  std::optional<grpc::Status> finish_ ABSL_GUARDED_BY(mu_);  // finish when idle
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool attaching_ ABSL_GUARDED_BY(mu_) = true;          // Attach or Close not yet called
  std::unique_ptr<Watch> watch_ ABSL_GUARDED_BY(mu_);
};

}  // namespace anvil::rpc

#endif  // ANVIL_SERVER_RPC_PROGRESS_STREAM_H_
