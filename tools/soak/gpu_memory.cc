#include "tools/soak/gpu_memory.h"

#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <regex>
#include <sstream>

#include <cuda_runtime.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "node/node_facts.h"

namespace anvil {
namespace {

std::string FindOnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::string p = dir + "/" + name;
    if (!dir.empty() && access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

absl::Status CudaStatus(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorString(err)));
}

}  // namespace

std::string NoGpuReason(int device) {
  std::string why;
  const int count = node::CountGpus(&why);
  if (count == 0) return absl::StrCat("no CUDA device (", why, ")");
  if (device >= count) return absl::StrCat("no CUDA device ", device, " (", count, " present)");
  return "";
}

absl::StatusOr<GpuMemory> GpuMemory::Open(int device, const std::string& gpu_uuid) {
  int mode = cudaComputeModeDefault;
  if (absl::Status s = CudaStatus(cudaDeviceGetAttribute(&mode, cudaDevAttrComputeMode, device),
                                  "cudaDeviceGetAttribute");
      !s.ok()) {
    return s;
  }
  if (mode == cudaComputeModeDefault) {
    if (absl::Status s = CudaStatus(cudaSetDevice(device), "cudaSetDevice"); !s.ok()) return s;
    if (absl::Status s = CudaStatus(cudaFree(nullptr), "creating a CUDA context"); !s.ok()) return s;
    return GpuMemory(device, gpu_uuid, "");
  }
  // A second context would keep the runner off the GPU: ask nvidia-smi.
  const std::string smi = FindOnPath("nvidia-smi");
  if (smi.empty()) {
    return absl::FailedPreconditionError(
        "the GPU allows one context at a time (compute mode) and nvidia-smi is not on PATH: "
        "device memory cannot be watched");
  }
  static const std::regex kUuid("GPU-[0-9a-fA-F-]+");
  if (!std::regex_match(gpu_uuid, kUuid)) {
    return absl::InvalidArgumentError(absl::StrCat("not a GPU UUID: '", gpu_uuid, "'"));
  }
  return GpuMemory(device, gpu_uuid, smi);
}

absl::StatusOr<int64_t> GpuMemory::UsedBytes() const {
  if (nvidia_smi_.empty()) {
    size_t free_b = 0, total = 0;
    if (absl::Status s = CudaStatus(cudaSetDevice(device_), "cudaSetDevice"); !s.ok()) return s;
    if (absl::Status s = CudaStatus(cudaMemGetInfo(&free_b, &total), "cudaMemGetInfo"); !s.ok()) return s;
    return static_cast<int64_t>(total - free_b);
  }
  const std::string cmd = absl::StrCat("'", nvidia_smi_, "' --id=", uuid_,
                                       " --query-gpu=memory.used --format=csv,noheader,nounits");
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return absl::InternalError("cannot start nvidia-smi");
  std::string out;
  std::array<char, 256> buf;
  while (fgets(buf.data(), buf.size(), p)) out += buf.data();
  const int rc = pclose(p);
  int64_t mib = 0;
  if (rc != 0 || !absl::SimpleAtoi(absl::StripAsciiWhitespace(out), &mib)) {
    return absl::InternalError(absl::StrCat("nvidia-smi: exit ", rc, ": ", out));
  }
  return mib << 20;
}

}  // namespace anvil
