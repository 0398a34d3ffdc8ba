#include "worker/runner/ceilings.h"

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "node/node_facts.h"
#include "sandbox/sandbox.h"
#include "worker/runner/cuda_util.h"
#include "worker/runner/device_ops.h"
#include "worker/runner/gemm_impls.h"

namespace anvil::runner {
namespace {

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

absl::StatusOr<Device> OpenDevice(int ordinal) {
  Device d;
  ANVIL_CUDA(cudaSetDevice(ordinal));
  ANVIL_CUDA(cudaFree(nullptr));
  cudaDeviceProp prop{};
  ANVIL_CUDA(cudaGetDeviceProperties(&prop, ordinal));
  d.info.set_gpu(node::NormaliseGpuName(prop.name));
  d.info.set_arch(node::ArchName(prop.major, prop.minor));
  d.info.set_gpu_uuid(node::GpuUuid(prop.uuid));
  d.info.set_sm_count(prop.multiProcessorCount);
  d.info.set_l2_bytes(prop.l2CacheSize);
  if (cublasCreate(&d.cublas) != CUBLAS_STATUS_SUCCESS) return absl::InternalError("cublasCreate failed");
  if (cublasLtCreate(&d.lt) != CUBLAS_STATUS_SUCCESS) return absl::InternalError("cublasLtCreate failed");
  const node::Versions versions = node::ReadVersions();
  d.cublas_version = absl::StrCat(versions.CublasCode());
  d.info.set_versions(node::MeasurementVersions(versions));
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
