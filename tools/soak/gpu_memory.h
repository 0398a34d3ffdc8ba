// Device memory in use on one GPU, read from outside the runner: through a
// CUDA context of the calling process (cudaMemGetInfo; device-wide, so every
// process's allocations count, and the caller's own context adds a constant),
// or, where the GPU's compute mode allows a single context, through
// nvidia-smi, which needs none. Thread-compatible: one thread at a time.
#ifndef ANVIL_TOOLS_SOAK_GPU_MEMORY_H_
#define ANVIL_TOOLS_SOAK_GPU_MEMORY_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace anvil {

// Empty when CUDA device `device` exists; else why not (for a clean skip).
std::string NoGpuReason(int device);

class GpuMemory {
 public:
  // gpu_uuid: "GPU-..." (RunnerInfo.gpu_uuid), used to address nvidia-smi.
  // Creates the CUDA context when the compute mode allows a second one.
  static absl::StatusOr<GpuMemory> Open(int device, const std::string& gpu_uuid);

  absl::StatusOr<int64_t> UsedBytes() const;
  const std::string& source() const { return source_; }  // "cudaMemGetInfo" or "nvidia-smi"

 private:
  GpuMemory(int device, std::string uuid, std::string nvidia_smi)
      : device_(device), uuid_(std::move(uuid)), nvidia_smi_(std::move(nvidia_smi)),
        source_(nvidia_smi_.empty() ? "cudaMemGetInfo" : "nvidia-smi") {}
  int device_;
  std::string uuid_;
  std::string nvidia_smi_;  // empty: cudaMemGetInfo
  std::string source_;
};

}  // namespace anvil

#endif  // ANVIL_TOOLS_SOAK_GPU_MEMORY_H_
