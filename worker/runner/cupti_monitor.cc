#include "worker/runner/cupti_monitor.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include <cuda.h>
#include <cuda_runtime.h>
#include <cupti.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "worker/runner/cupti_util.h"

namespace anvil::runner {
namespace {

constexpr size_t kBufferBytes = 8 << 20;

struct State {
  std::mutex mu;
  std::vector<Activity> pending;  // guarded by mu
  pid_t main_tid = 0;
  std::atomic<bool> auditing{false};
  std::atomic<int64_t> foreign{0}, allocs{0}, syncs{0}, streams{0};
  CUpti_SubscriberHandle subscriber = nullptr;
};
State& S() {
  static State* s = new State;
  return *s;
}


void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = kBufferBytes;
  *max_records = 0;
}

Activity FromKernel(const CUpti_ActivityKernel10* k) {
  Activity a;
  a.kind = Activity::kKernel;
  a.start_ns = k->start; a.end_ns = k->end; a.stream_id = k->streamId;
  a.name = k->name ? k->name : "?";
  a.ctas = int64_t(k->gridX) * k->gridY * k->gridZ;
  a.threads_per_cta = int64_t(k->blockX) * k->blockY * k->blockZ;
  a.registers = k->registersPerThread;
  a.shared_bytes = int64_t(k->staticSharedMemory) + k->dynamicSharedMemory;
  a.cluster = int64_t(k->clusterX) * k->clusterY * k->clusterZ;
  return a;
}

void CUPTIAPI BufferCompleted(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  std::vector<Activity> got;
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL ||
        record->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
      got.push_back(FromKernel(reinterpret_cast<CUpti_ActivityKernel10*>(record)));
    } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
      auto* m = reinterpret_cast<CUpti_ActivityMemset4*>(record);
      got.push_back({Activity::kMemset, m->start, m->end, m->streamId, "memset"});
    } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      auto* m = reinterpret_cast<CUpti_ActivityMemcpy6*>(record);
      got.push_back({Activity::kMemcpy, m->start, m->end, m->streamId, "memcpy"});
    }
  }
  std::free(buffer);
  std::lock_guard<std::mutex> lock(S().mu);
  S().pending.insert(S().pending.end(), got.begin(), got.end());
}

bool Contains(const char* s, const char* part) { return s && std::strstr(s, part); }

void CUPTIAPI OnApi(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void* data) {
  State& s = S();
  if (!s.auditing.load(std::memory_order_relaxed)) return;
  const auto* info = static_cast<const CUpti_CallbackData*>(data);
  if (info->callbackSite != CUPTI_API_ENTER) return;
  if (static_cast<pid_t>(syscall(SYS_gettid)) != s.main_tid) ++s.foreign;
  const char* f = info->functionName;
  if (Contains(f, "Malloc") || Contains(f, "MemAlloc") || Contains(f, "MemCreate")) ++s.allocs;
  if (Contains(f, "Synchronize")) ++s.syncs;
  if (Contains(f, "StreamCreate")) ++s.streams;
}

constexpr CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                         CUPTI_ACTIVITY_KIND_MEMSET,
                                         CUPTI_ACTIVITY_KIND_MEMCPY};

}  // namespace

absl::StatusOr<std::unique_ptr<CuptiMonitor>> CuptiMonitor::Start() {
  State& s = S();
  s.main_tid = static_cast<pid_t>(syscall(SYS_gettid));
  if (absl::Status st = CuptiStatus(cuptiActivityRegisterCallbacks(BufferRequested, BufferCompleted),
                              "register buffers");
      !st.ok()) {
    return st;
  }
  if (absl::Status st = CuptiStatus(cuptiSubscribe(&s.subscriber, OnApi, nullptr), "subscribe");
      !st.ok()) {
    return st;
  }
  return std::unique_ptr<CuptiMonitor>(new CuptiMonitor);
}

CuptiMonitor::~CuptiMonitor() {
  (void)SetActivity(false);
  cuptiActivityFlushAll(1);
  if (S().subscriber) cuptiUnsubscribe(S().subscriber);
  S().subscriber = nullptr;
}

absl::Status CuptiMonitor::SetActivity(bool on) {
  for (CUpti_ActivityKind kind : kKinds) {
    CUptiResult r = on ? cuptiActivityEnable(kind) : cuptiActivityDisable(kind);
    if (absl::Status st = CuptiStatus(r, on ? "enable activity" : "disable activity"); !st.ok()) {
      return st;
    }
  }
  return absl::OkStatus();
}

absl::Status CuptiMonitor::SetAudit(bool on) {
  // Callbacks are off outside audits: they would add host time to every call.
  State& s = S();
  for (CUpti_CallbackDomain d : {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_CB_DOMAIN_DRIVER_API}) {
    if (absl::Status st = CuptiStatus(cuptiEnableDomain(on ? 1 : 0, s.subscriber, d), "callbacks");
        !st.ok()) {
      return st;
    }
  }
  s.auditing.store(on);
  return absl::OkStatus();
}

uint64_t CuptiMonitor::Now() const {
  uint64_t t = 0;
  cuptiGetTimestamp(&t);
  return t;
}

std::vector<Activity> CuptiMonitor::Take(uint64_t t0, uint64_t t1) {
  cuptiActivityFlushAll(0);
  std::lock_guard<std::mutex> lock(S().mu);
  std::vector<Activity> in, later;
  for (Activity& a : S().pending) {
    if (a.start_ns > t1) {
      later.push_back(std::move(a));
    } else if (a.start_ns >= t0) {
      in.push_back(std::move(a));
    }
  }
  S().pending = std::move(later);
  return in;
}

ApiAudit CuptiMonitor::TakeAudit() {
  State& s = S();
  return {s.foreign.exchange(0), s.allocs.exchange(0), s.syncs.exchange(0),
          s.streams.exchange(0)};
}

absl::StatusOr<uint32_t> CuptiMonitor::StreamId(void* stream) const {
  absl::StatusOr<CUcontext> ctx = CurrentContext();
  if (!ctx.ok()) return ctx.status();
  uint32_t id = 0;
  if (absl::Status st =
          CuptiStatus(cuptiGetStreamIdEx(*ctx, static_cast<CUstream>(stream), 0, &id), "stream id");
      !st.ok()) {
    return st;
  }
  return id;
}

}  // namespace anvil::runner
