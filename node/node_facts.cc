#include "node/node_facts.h"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"

namespace anvil::node {

std::string NormaliseGpuName(absl::string_view name) {
  absl::ConsumePrefix(&name, "NVIDIA ");
  return absl::StrReplaceAll(absl::StripAsciiWhitespace(name), {{" ", "-"}});
}

std::string ArchName(int major, int minor) {
  return absl::StrCat("sm_", major, minor, major == 9 ? "a" : "");
}

std::string GpuUuid(const cudaUUID_t& uuid) {
  std::string s = "GPU-";
  for (int i = 0; i < 16; ++i) {
    absl::StrAppend(&s, absl::Hex(static_cast<unsigned char>(uuid.bytes[i]), absl::kZeroPad2));
    if (i == 3 || i == 5 || i == 7 || i == 9) s += '-';
  }
  return s;
}

int CountGpus(std::string* why) {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    if (why != nullptr) *why = cudaGetErrorString(err);
    return 0;
  }
  if (n == 0 && why != nullptr) *why = "no CUDA device";
  return n;
}

absl::StatusOr<std::vector<v1::GpuInfo>> ListGpus() {
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
    g.set_uuid(GpuUuid(p.uuid));
    g.set_model(NormaliseGpuName(p.name));
    g.set_arch(ArchName(p.major, p.minor));
    g.set_sm_count(p.multiProcessorCount);
    g.set_memory_bytes(static_cast<int64_t>(p.totalGlobalMem));
  }
  return gpus;
}

Versions ReadVersions() {
  Versions v;
  cudaDriverGetVersion(&v.driver);
  cudaRuntimeGetVersion(&v.runtime);
  cublasGetProperty(MAJOR_VERSION, &v.cublas_major);
  cublasGetProperty(MINOR_VERSION, &v.cublas_minor);
  cublasGetProperty(PATCH_LEVEL, &v.cublas_patch);
  v.cublaslt = cublasLtGetVersion();
  return v;
}

std::string MeasurementVersions(const Versions& v) {
  return absl::StrCat("cudart=", v.runtime, " driver=", v.driver, " cublas=", v.CublasCode(),
                      " cublaslt=", v.cublaslt);
}

std::string WorkerVersions(const Versions& v) {
  return absl::StrCat("driver=", v.driver, " cuda=", v.runtime, " cublas=", v.cublas_major, ".",
                      v.cublas_minor, ".", v.cublas_patch);
}

}  // namespace anvil::node
