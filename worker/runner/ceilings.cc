#include "worker/runner/ceilings.h"

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "sandbox/sandbox.h"
#include "worker/runner/cuda_util.h"
#include "worker/runner/device_ops.h"
#include "worker/runner/gemm_impls.h"

namespace anvil::runner {
namespace {

std::string Uuid(const cudaUUID_t& u) {
  std::string s = "GPU-";
  for (int i = 0; i < 16; ++i) {
    char b[3];
    std::snprintf(b, sizeof(b), "%02x", static_cast<unsigned char>(u.bytes[i]));
    s += b;
    if (i == 3 || i == 5 || i == 7 || i == 9) s += '-';
  }
  return s;
}

// Best time in ms of `reps` event-timed repetitions of `body` on `stream`.
template <typename F>
absl::StatusOr<float> BestMs(cudaStream_t stream, int reps, F body) {
  cudaEvent_t e0, e1;
  ANVIL_CUDA(cudaEventCreate(&e0));
  ANVIL_CUDA(cudaEventCreate(&e1));
  float best = 1e30f;
  for (int i = 0; i < reps; ++i) {
    cudaEventRecord(e0, stream);
    body();
    cudaEventRecord(e1, stream);
    ANVIL_CUDA(cudaEventSynchronize(e1));
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    best = std::min(best, ms);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  ANVIL_CUDA(cudaGetLastError());
  return best;
}

}  // namespace

std::string NormaliseGpuName(const std::string& name) {
  absl::string_view n = name;
  absl::ConsumePrefix(&n, "NVIDIA ");
  return absl::StrReplaceAll(absl::StripAsciiWhitespace(n), {{" ", "-"}});
}

absl::StatusOr<Device> OpenDevice(int ordinal) {
  Device d;
  ANVIL_CUDA(cudaSetDevice(ordinal));
  ANVIL_CUDA(cudaFree(nullptr));
  cudaDeviceProp prop{};
  ANVIL_CUDA(cudaGetDeviceProperties(&prop, ordinal));
  d.info.set_gpu(NormaliseGpuName(prop.name));
  d.info.set_arch(absl::StrCat("sm_", prop.major, prop.minor, prop.major == 9 ? "a" : ""));
  d.info.set_gpu_uuid(Uuid(prop.uuid));
  d.info.set_sm_count(prop.multiProcessorCount);
  d.info.set_l2_bytes(prop.l2CacheSize);
  if (cublasCreate(&d.cublas) != CUBLAS_STATUS_SUCCESS) return absl::InternalError("cublasCreate failed");
  if (cublasLtCreate(&d.lt) != CUBLAS_STATUS_SUCCESS) return absl::InternalError("cublasLtCreate failed");
  int runtime = 0, driver = 0, cublas = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  cublasGetVersion(d.cublas, &cublas);
  d.cublas_version = absl::StrCat(cublas);
  d.info.set_versions(absl::StrCat("cudart=", runtime, " driver=", driver, " cublas=", cublas,
                                   " cublaslt=", cublasLtGetVersion()));
  return d;
}

absl::StatusOr<v1::Ceilings> MeasureCeilings(cublasHandle_t cublas, cudaStream_t stream) {
  v1::Ceilings c;
  constexpr size_t kCopy = 512ull << 20;
  {
    absl::StatusOr<DeviceMemory> src = DeviceMemory::Allocate(kCopy);
    absl::StatusOr<DeviceMemory> dst = DeviceMemory::Allocate(kCopy);
    if (!src.ok() || !dst.ok()) return absl::ResourceExhaustedError("no memory for the copy ceiling");
    ANVIL_CUDA(cudaMemsetAsync(src->get(), 1, kCopy, stream));
    absl::StatusOr<float> ms = BestMs(stream, 8, [&] {
      cudaMemcpyAsync(dst->get(), src->get(), kCopy, cudaMemcpyDeviceToDevice, stream);
    });
    if (!ms.ok()) return ms.status();
    c.set_bytes_per_s(2.0 * kCopy / (*ms * 1e-3));
  }
  constexpr int kN = 8192;
  const size_t n = size_t(kN) * kN;
  absl::StatusOr<DeviceMemory> a = DeviceMemory::Allocate(n * 2);
  absl::StatusOr<DeviceMemory> b = DeviceMemory::Allocate(n * 2);
  absl::StatusOr<DeviceMemory> out = DeviceMemory::Allocate(n * 2);
  if (!a.ok() || !b.ok() || !out.ok()) return absl::ResourceExhaustedError("no memory for the FLOP ceiling");
  ANVIL_CUDA(FillNormal(a->get<__half>(), n, 1, stream));
  ANVIL_CUDA(FillNormal(b->get<__half>(), n, 2, stream));
  CublasGemm gemm(cublas, GemmShape{kN, kN, kN, v1::LAYOUT_NT});
  absl::StatusOr<float> ms = BestMs(stream, 12, [&] {
    gemm.Run(a->get<__half>(), b->get<__half>(), out->get<__half>(), stream);
  });
  if (!ms.ok()) return ms.status();
  c.set_flops_per_s(2.0 * kN * double(kN) * kN / (*ms * 1e-3));
  return c;
}

absl::Status InstallSeccomp() { return sandbox::InstallRunnerSeccomp(); }

}  // namespace anvil::runner
