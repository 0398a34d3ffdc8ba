#include "worker/toolchain.h"

#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "deploy/layout.h"

#ifndef ANVIL_DEFAULT_CUTLASS_DIR
#define ANVIL_DEFAULT_CUTLASS_DIR ""
#endif

namespace anvil {
namespace fs = std::filesystem;
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

bool IsExecutable(const std::string& p) { return !p.empty() && access(p.c_str(), X_OK) == 0; }

std::string FindCudaRoot() {
  for (const std::string& root : {Env("CUDA_HOME"), Env("CUDA_PATH"), std::string("/usr/local/cuda")}) {
    if (IsExecutable(root + "/bin/nvcc")) return fs::canonical(root).string();
  }
  std::istringstream path(Env("PATH"));
  for (std::string dir; std::getline(path, dir, ':');) {
    if (IsExecutable(dir + "/nvcc")) return fs::canonical(dir + "/..").string();
  }
  return "";
}

// "Cuda compilation tools, release 13.0, V13.0.88" -> "13.0.88".
std::string NvccVersion(const std::string& nvcc) {
  std::string cmd = absl::StrCat("'", nvcc, "' --version 2>/dev/null");
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return "";
  std::string out;
  std::array<char, 256> buf;
  while (fgets(buf.data(), buf.size(), p)) out += buf.data();
  pclose(p);
  size_t v = out.rfind(", V");
  if (v == std::string::npos) return "";
  std::string version = out.substr(v + 3);
  return std::string(absl::StripAsciiWhitespace(version.substr(0, version.find('\n'))));
}

std::string FindCutlass() {
  for (const std::string& d : {Env("ANVIL_CUTLASS_DIR"), deploy::Installed("share/anvil/cutlass"),
                               std::string(ANVIL_DEFAULT_CUTLASS_DIR)}) {
    if (!d.empty() && fs::exists(d + "/include/cute/tensor.hpp")) return fs::canonical(d).string();
  }
  return "";
}

}  // namespace

std::string Toolchain::ExecutableDir() { return deploy::ExecutableDir(); }

absl::StatusOr<Toolchain> Toolchain::Find() {
  Toolchain t;
  t.cuda_root = FindCudaRoot();
  if (t.cuda_root.empty()) {
    return absl::NotFoundError("nvcc not found: set CUDA_HOME or put nvcc on PATH");
  }
  t.nvcc = t.cuda_root + "/bin/nvcc";
  t.nvcc_version = NvccVersion(t.nvcc);
  t.cutlass_dir = FindCutlass();
  if (!t.cutlass_dir.empty()) {
    std::ifstream v(t.cutlass_dir + "/VERSION");
    std::getline(v, t.cutlass_version);
  }
  t.runner = Env("ANVIL_RUNNER");
  if (t.runner.empty()) t.runner = deploy::Installed("bin/anvil-runner");
  if (t.runner.empty()) t.runner = ExecutableDir() + "/anvil-runner";
  return t;
}

}  // namespace anvil
