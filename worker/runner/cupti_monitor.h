// CuptiMonitor: what a call really did on the GPU. Activity records give the
// device time of every kernel, memset and copy on any stream; API callbacks
// show CUDA calls made from other host threads, allocations and syncs.
// One per process (CUPTI is process-global). Not thread-safe: drive it from
// the runner's main thread; the CUPTI callbacks themselves are safe.
#ifndef ANVIL_WORKER_RUNNER_CUPTI_MONITOR_H_
#define ANVIL_WORKER_RUNNER_CUPTI_MONITOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace anvil::runner {

// One unit of GPU work recorded by CUPTI.
struct Activity {
  enum Kind { kKernel, kMemset, kMemcpy } kind = kKernel;
  uint64_t start_ns = 0, end_ns = 0;  // CUPTI timestamps
  uint32_t stream_id = 0;
  std::string name;                  // kernel name; "memset"/"memcpy" otherwise
  int64_t ctas = 0, threads_per_cta = 0, registers = 0, shared_bytes = 0, cluster = 0;
  double us() const { return (end_ns - start_ns) * 1e-3; }
};

// CUDA API use seen while auditing was on.
struct ApiAudit {
  int64_t foreign_thread_calls = 0;  // CUDA calls from threads other than the main one
  int64_t allocations = 0;           // *Malloc* / *MemAlloc* / *MemCreate*
  int64_t synchronizations = 0;      // *Synchronize*
  int64_t stream_creations = 0;      // *StreamCreate*
};

class CuptiMonitor {
 public:
  // REQUIRES: called once, from the main thread, before any CUDA work to audit.
  static absl::StatusOr<std::unique_ptr<CuptiMonitor>> Start();
  ~CuptiMonitor();

  // Records kernels, memsets and copies while on.
  absl::Status SetActivity(bool on);
  // Counts CUDA API calls (ApiAudit) while on.
  absl::Status SetAudit(bool on);
  // CUPTI's clock, comparable with Activity timestamps.
  uint64_t Now() const;
  // Flushes CUPTI and returns every record whose start lies in [t0, t1];
  // records before t1 are dropped from the pending list.
  std::vector<Activity> Take(uint64_t t0, uint64_t t1);
  // API use since the last call.
  ApiAudit TakeAudit();
  // CUPTI's id for a stream of the current context.
  absl::StatusOr<uint32_t> StreamId(void* stream) const;

 private:
  CuptiMonitor() = default;
};

}  // namespace anvil::runner

#endif  // ANVIL_WORKER_RUNNER_CUPTI_MONITOR_H_
