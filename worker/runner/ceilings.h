// Runner start-up: opening the device and its vendor libraries, measuring
// speed-of-light ceilings, and the seccomp filter installed after CUDA init.
#ifndef ANVIL_WORKER_RUNNER_CEILINGS_H_
#define ANVIL_WORKER_RUNNER_CEILINGS_H_

#include <string>

#include <cublasLt.h>
#include <cublas_v2.h>

#include "absl/status/statusor.h"
#include "anvil/v1/runner.pb.h"

namespace anvil::runner {

// The opened device; handles live until the process exits.
struct Device {
  v1::RunnerInfo info;
  cublasHandle_t cublas = nullptr;
  cublasLtHandle_t lt = nullptr;
  std::string cublas_version;  // e.g. "130100"
};

// Selects and initialises `ordinal`, creates the cuBLAS and cuBLASLt handles.
absl::StatusOr<Device> OpenDevice(int ordinal);

// Peak dense fp16 rate (cuBLAS at 8192^3, best call) and device-to-device
// copy bandwidth (bytes read plus written, best of several 512 MiB copies).
absl::StatusOr<v1::Ceilings> MeasureCeilings(cublasHandle_t cublas, cudaStream_t stream);

// Installs the sandbox's runner seccomp filter (no sockets, processes,
// ptrace or file writes from here on).
absl::Status InstallSeccomp();

}  // namespace anvil::runner

#endif  // ANVIL_WORKER_RUNNER_CEILINGS_H_
