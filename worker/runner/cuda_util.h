// Small CUDA helpers for the runner: status conversion and RAII device
// memory. Not thread-safe beyond what the CUDA runtime guarantees.
#ifndef ANVIL_WORKER_RUNNER_CUDA_UTIL_H_
#define ANVIL_WORKER_RUNNER_CUDA_UTIL_H_

#include <cstddef>
#include <cstdint>
#include <utility>

#include <cuda_runtime.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace anvil::runner {

inline absl::Status CudaStatus(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorName(err), " (",
                                          cudaGetErrorString(err), ")"));
}

#define ANVIL_CUDA(expr)                                                 \
  do {                                                                   \
    if (absl::Status _st = ::anvil::runner::CudaStatus((expr), #expr);   \
        !_st.ok())                                                       \
      return _st;                                                        \
  } while (0)

#define ANVIL_RETURN_IF_ERROR(expr)                 \
  do {                                              \
    if (absl::Status _st = (expr); !_st.ok()) return _st; \
  } while (0)

// Owns a cudaMalloc'd region.
class DeviceMemory {
 public:
  DeviceMemory() = default;
  static absl::StatusOr<DeviceMemory> Allocate(size_t bytes) {
    DeviceMemory m;
    if (bytes == 0) return m;
    cudaError_t err = cudaMalloc(&m.ptr_, bytes);
    if (err != cudaSuccess) {
      cudaGetLastError();  // allocation failures are not sticky; clear them
      return absl::ResourceExhaustedError(
          absl::StrCat("cudaMalloc(", bytes, " bytes): ", cudaGetErrorString(err)));
    }
    m.bytes_ = bytes;
    return m;
  }
  DeviceMemory(DeviceMemory&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceMemory& operator=(DeviceMemory&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  ~DeviceMemory() {
    if (ptr_) cudaFree(ptr_);
  }
  template <typename T = void>
  T* get() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// A buffer with guard bands on both sides: [guard | payload, padded to 256 |
// guard]. The payload starts 256-byte aligned; every byte outside it but
// inside the allocation is a guard byte that must never change.
class GuardedBuffer {
 public:
  static constexpr size_t kGuardBytes = 64 * 1024;
  static absl::StatusOr<GuardedBuffer> Allocate(size_t payload_bytes) {
    GuardedBuffer b;
    b.payload_bytes_ = payload_bytes;
    size_t padded = (payload_bytes + 255) / 256 * 256;
    absl::StatusOr<DeviceMemory> mem = DeviceMemory::Allocate(2 * kGuardBytes + padded);
    if (!mem.ok()) return mem.status();
    b.mem_ = std::move(*mem);
    return b;
  }
  template <typename T>
  T* data() const { return reinterpret_cast<T*>(mem_.get<char>() + kGuardBytes); }
  size_t payload_bytes() const { return payload_bytes_; }
  // The guard regions: [start, start + bytes).
  std::pair<const char*, size_t> front_guard() const { return {mem_.get<char>(), kGuardBytes}; }
  std::pair<const char*, size_t> back_guard() const {
    const char* end = mem_.get<char>() + kGuardBytes + payload_bytes_;
    return {end, mem_.bytes() - kGuardBytes - payload_bytes_};
  }
  char* base() const { return mem_.get<char>(); }
  size_t total_bytes() const { return mem_.bytes(); }

 private:
  DeviceMemory mem_;
  size_t payload_bytes_ = 0;
};

}  // namespace anvil::runner

#endif  // ANVIL_WORKER_RUNNER_CUDA_UTIL_H_
