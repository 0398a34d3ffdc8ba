// Where the worker's tools live: nvcc, the CUDA toolkit root, the CUTLASS
// headers and the anvil-runner program. Found once from the environment, the
// executable's own location (the relocatable bundle) and build defaults.
// Thread-safe after construction (read-only).
#ifndef ANVIL_WORKER_TOOLCHAIN_H_
#define ANVIL_WORKER_TOOLCHAIN_H_

#include <string>

#include "absl/status/statusor.h"

namespace anvil {

struct Toolchain {
  std::string cuda_root;      // e.g. /usr/local/cuda (resolved)
  std::string nvcc;           // <cuda_root>/bin/nvcc
  std::string nvcc_version;   // "13.0.88"
  std::string cutlass_dir;    // holds include/cute and include/cutlass
  std::string cutlass_version;
  std::string runner;         // the anvil-runner executable

  // CUDA_HOME / CUDA_PATH, else /usr/local/cuda, else nvcc on PATH;
  // ANVIL_CUTLASS_DIR, else the bundle's share/anvil/cutlass (deploy/layout.h:
  // found from the executable, also from libexec/tests), else the build's;
  // ANVIL_RUNNER, else the bundle's bin/anvil-runner, else the one beside the
  // executable (the build tree).
  static absl::StatusOr<Toolchain> Find();
  // Directory of the running executable.
  static std::string ExecutableDir();
};

}  // namespace anvil

#endif  // ANVIL_WORKER_TOOLCHAIN_H_
