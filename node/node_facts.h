// Node facts: what this node's CUDA runtime says about its GPUs, and the
// versions of its driver, CUDA runtime, cuBLAS and cuBLASLt. The one place
// that reads and names them (the runner, the worker daemon, local mode, the
// CLI's GPU checks and doctor, the GPU tests), so that problem keys, task
// routing and the export's version checks agree.
// Thread-safe (the CUDA runtime's queries are).
#ifndef ANVIL_NODE_NODE_FACTS_H_
#define ANVIL_NODE_NODE_FACTS_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "anvil/v1/fleet.pb.h"

namespace anvil::node {

// The GPU model as problem keys name it: "NVIDIA H100 80GB HBM3" ->
// "H100-80GB-HBM3" (prefix dropped, spaces as '-').
std::string NormaliseGpuName(absl::string_view name);
// The compile target of a compute capability: (9, 0) -> "sm_90a" (Hopper's
// arch-specific features), (8, 9) -> "sm_89".
std::string ArchName(int major, int minor);
// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as nvidia-smi prints it.
std::string GpuUuid(const cudaUUID_t& uuid);

// How many CUDA devices this process sees; 0 with *why (if given) saying why.
int CountGpus(std::string* why = nullptr);
// Every visible GPU's facts (ordinal, UUID, model, arch, SMs, memory);
// Unavailable when the CUDA runtime cannot be queried.
absl::StatusOr<std::vector<v1::GpuInfo>> ListGpus();

struct Versions {
  int driver = 0;   // cudaDriverGetVersion, e.g. 13000
  int runtime = 0;  // cudaRuntimeGetVersion
  int cublas_major = 0, cublas_minor = 0, cublas_patch = 0;
  size_t cublaslt = 0;  // cublasLtGetVersion
  // cuBLAS's version number as cublasGetVersion reports it (major*10000 +
  // minor*100 + patch).
  int CublasCode() const { return cublas_major * 10000 + cublas_minor * 100 + cublas_patch; }
};
Versions ReadVersions();
// The versions as measurements record them ("cudart=13000 driver=13000
// cublas=130100 cublaslt=130100"): the export's validators compare these.
std::string MeasurementVersions(const Versions& v);
// The versions as a worker registers them ("driver=13000 cuda=13000
// cublas=13.1.0").
std::string WorkerVersions(const Versions& v);

}  // namespace anvil::node

#endif  // ANVIL_NODE_NODE_FACTS_H_
