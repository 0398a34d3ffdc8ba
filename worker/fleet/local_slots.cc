// LocalWorkerComponents: this node's GPUs (CUDA runtime) and a LocalEvaluator
// per slot, pinned to its GPU by the evaluator's device ordinal.
#include <cublas_api.h>
#include <cuda_runtime.h>


#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "server/local_evaluator.h"
#include "worker/build_cache.h"
#include "worker/fleet/worker_main.h"

namespace anvil {
namespace {

// The model name as the runner reports it (worker/runner/ceilings.cc,
// NormaliseGpuName): problem keys and task routing must agree on it.
std::string ModelName(const char* name) {
  absl::string_view n = name;
  absl::ConsumePrefix(&n, "NVIDIA ");
  return absl::StrReplaceAll(absl::StripAsciiWhitespace(n), {{" ", "-"}});
}

std::string Uuid(const cudaUUID_t& u) {
  std::string hex;
  for (int i = 0; i < 16; ++i) {
    absl::StrAppend(&hex, absl::Hex(static_cast<unsigned char>(u.bytes[i]), absl::kZeroPad2));
    if (i == 3 || i == 5 || i == 7 || i == 9) hex += '-';
  }
  return absl::StrCat("GPU-", hex);
}

absl::StatusOr<std::vector<v1::GpuInfo>> CudaGpus() {
  int count = 0;
  if (cudaError_t err = cudaGetDeviceCount(&count); err != cudaSuccess) {
    return absl::UnavailableError(absl::StrCat("no usable GPU (", cudaGetErrorString(err), ")"));
  }
  std::vector<v1::GpuInfo> gpus;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    v1::GpuInfo& g = gpus.emplace_back();
    g.set_ordinal(i);
    g.set_uuid(Uuid(p.uuid));
    g.set_model(ModelName(p.name));
    g.set_arch(absl::StrCat("sm_", p.major, p.minor, p.major == 9 ? "a" : ""));
    g.set_sm_count(p.multiProcessorCount);
    g.set_memory_bytes(static_cast<int64_t>(p.totalGlobalMem));
  }
  return gpus;
}

std::string Versions() {
  int driver = 0, runtime = 0, major = 0, minor = 0, patch = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  cublasGetProperty(MAJOR_VERSION, &major);
  cublasGetProperty(MINOR_VERSION, &minor);
  cublasGetProperty(PATCH_LEVEL, &patch);
  return absl::StrCat("driver=", driver, " cuda=", runtime, " cublas=", major, ".", minor, ".", patch);
}

}  // namespace

FleetWorkerComponents LocalWorkerComponents() {
  FleetWorkerComponents c;
  c.gpus = CudaGpus;
  c.versions = Versions;
  // The artifacts are loaded by the sandboxed runner: the build cache's rules
  // (reachable by the sandbox's uid, not swappable by another user).
  c.check_cache_dir = PrepareBuildCacheDir;
  c.evaluator = [](int ordinal) -> absl::StatusOr<std::unique_ptr<CandidateEvaluator>> {
    LocalEvaluatorOptions o;
    o.device = ordinal < 0 ? 0 : ordinal;
    o.build_jobs = DefaultBuildJobs();
    absl::StatusOr<std::unique_ptr<LocalEvaluator>> e = LocalEvaluator::Create(o);
    if (!e.ok()) return e.status();
    return std::unique_ptr<CandidateEvaluator>(*std::move(e));
  };
  return c;
}

}  // namespace anvil
