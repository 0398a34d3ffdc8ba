// CaptureProcessState (process_state.h): the CUDA queries.
#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "worker/runner/cuda_util.h"
#include "worker/runner/cupti_util.h"
#include "worker/runner/process_state.h"
#include "worker/runner/session.h"

namespace anvil::runner {
namespace {

// A limit the device does not support (the device runtime's sync depth on
// sm_90 and later) answers an error that is not sticky: clear it and leave
// the fact out, on both sides alike.
void AddLimit(ProcessState& s, const char* name, cudaLimit limit) {
  size_t value = 0;
  if (cudaDeviceGetLimit(&value, limit) != cudaSuccess) {
    cudaGetLastError();
    return;
  }
  s.values[absl::StrCat("limit.", name)] = static_cast<int64_t>(value);
}

absl::Status AddStream(ProcessState& s, cudaStream_t stream) {
  int priority = 0;
  unsigned int flags = 0;
  ANVIL_CUDA(cudaStreamGetPriority(stream, &priority));
  ANVIL_CUDA(cudaStreamGetFlags(stream, &flags));
  s.values["stream.priority"] = priority;
  s.values["stream.flags"] = flags;
  cudaStreamAttrValue v;
  std::memset(&v, 0, sizeof(v));
  ANVIL_CUDA(cudaStreamGetAttribute(stream, cudaStreamAttributeSynchronizationPolicy, &v));
  s.values["stream.sync_policy"] = static_cast<int64_t>(v.syncPolicy);
  std::memset(&v, 0, sizeof(v));
  ANVIL_CUDA(cudaStreamGetAttribute(stream, cudaStreamAttributeAccessPolicyWindow, &v));
  const cudaAccessPolicyWindow& w = v.accessPolicyWindow;
  s.values["stream.access_policy.base_ptr"] = static_cast<int64_t>(reinterpret_cast<uintptr_t>(w.base_ptr));
  s.values["stream.access_policy.num_bytes"] = static_cast<int64_t>(w.num_bytes);
  // hitRatio is a float in [0, 1]: compared in millionths.
  s.values["stream.access_policy.hit_ratio_ppm"] = static_cast<int64_t>(w.hitRatio * 1e6);
  s.values["stream.access_policy.hit_prop"] = static_cast<int64_t>(w.hitProp);
  s.values["stream.access_policy.miss_prop"] = static_cast<int64_t>(w.missProp);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ProcessState> CaptureProcessState(cudaStream_t stream) {
  ProcessState s;
  s.values["threads"] = CountThreads();
  // The device and context every later call of the runner goes to.
  int device = -1;
  ANVIL_CUDA(cudaGetDevice(&device));
  s.values["device"] = device;
  absl::StatusOr<CUcontext> context = CurrentContext();
  if (!context.ok()) return context.status();
  s.values["context"] = static_cast<int64_t>(reinterpret_cast<uintptr_t>(*context));
  AddLimit(s, "stack_size", cudaLimitStackSize);
  AddLimit(s, "printf_fifo_size", cudaLimitPrintfFifoSize);
  AddLimit(s, "malloc_heap_size", cudaLimitMallocHeapSize);
  AddLimit(s, "dev_runtime_sync_depth", cudaLimitDevRuntimeSyncDepth);
  AddLimit(s, "dev_runtime_pending_launch_count", cudaLimitDevRuntimePendingLaunchCount);
  AddLimit(s, "max_l2_fetch_granularity", cudaLimitMaxL2FetchGranularity);
  AddLimit(s, "persisting_l2_cache_size", cudaLimitPersistingL2CacheSize);
  cudaFuncCache cache = cudaFuncCachePreferNone;
  ANVIL_CUDA(cudaDeviceGetCacheConfig(&cache));
  s.values["cache_config"] = static_cast<int64_t>(cache);
  // Deprecated since CUDA 12.x and without effect on devices whose bank size
  // is fixed (all we run on), but still declared in CUDA 13: read while it
  // exists, so a device where it matters is covered.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  cudaSharedMemConfig banks = cudaSharedMemBankSizeDefault;
  if (cudaDeviceGetSharedMemConfig(&banks) == cudaSuccess) {
    s.values["shared_mem_config"] = static_cast<int64_t>(banks);
  } else {
    cudaGetLastError();
  }
#pragma GCC diagnostic pop
  unsigned int flags = 0;
  ANVIL_CUDA(cudaGetDeviceFlags(&flags));
  s.values["device_flags"] = flags;
  ANVIL_RETURN_IF_ERROR(AddStream(s, stream));
  ANVIL_CUDA(cudaDeviceSynchronize());
  size_t free_bytes = 0, total = 0;
  ANVIL_CUDA(cudaMemGetInfo(&free_bytes, &total));
  s.free_device_bytes = static_cast<int64_t>(free_bytes);
  return s;
}

}  // namespace anvil::runner
