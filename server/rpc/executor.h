// Executor: a fixed pool of threads running queued closures in FIFO order.
// RPC handlers hand their work (store reads and writes, job creation) to it
// so no gRPC thread ever waits on SQLite or a job.
// Thread-safe. The destructor runs what is queued, then joins the threads.
#ifndef ANVIL_SERVER_RPC_EXECUTOR_H_
#define ANVIL_SERVER_RPC_EXECUTOR_H_

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace anvil::rpc {

class Executor {
 public:
  explicit Executor(int threads);  // REQUIRES: threads >= 1
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  void Submit(std::function<void()> work);
  int queued() const;

 private:
  void Loop();
  mutable absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace anvil::rpc

#endif  // ANVIL_SERVER_RPC_EXECUTOR_H_
