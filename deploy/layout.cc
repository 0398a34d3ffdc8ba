#include "deploy/layout.h"

#include <filesystem>
#include <system_error>

namespace anvil::deploy {
namespace fs = std::filesystem;

std::string ExecutableDir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : exe.parent_path().string();
}

std::string InstallRoot() {
  std::error_code ec;
  fs::path dir = ExecutableDir();
  for (int up = 0; up < 3 && !dir.empty(); ++up, dir = dir.parent_path()) {
    if (fs::is_directory(dir / "share" / "anvil", ec)) return dir.string();
    if (dir == dir.root_path()) break;
  }
  return "";
}

std::string Installed(std::string_view relative) {
  const std::string root = InstallRoot();
  if (root.empty()) return "";
  const fs::path p = fs::path(root) / relative;
  std::error_code ec;
  return fs::exists(p, ec) ? p.string() : std::string();
}

}  // namespace anvil::deploy
