// The bubblewrap command line: namespaces and a narrow filesystem. See
// internal.h and SANDBOX.md ("Namespaces").
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>

#include "absl/strings/match.h"
#include "sandbox/internal.h"

namespace anvil::sandbox::internal {
namespace {

using Args = std::vector<std::string>;

void Add(Args* a, std::initializer_list<std::string> items) {
  a->insert(a->end(), items.begin(), items.end());
}

std::string RealPath(const std::string& path) {
  char buf[PATH_MAX];
  return realpath(path.c_str(), buf) != nullptr ? std::string(buf) : std::string();
}

// Top-level system directories: the merged-/usr symlinks stay symlinks.
void AddSystemDirs(Args* a) {
  Add(a, {"--ro-bind", "/usr", "/usr"});
  for (const char* dir : {"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}) {
    struct stat st;
    if (lstat(dir, &st) != 0) continue;
    char target[PATH_MAX];
    const ssize_t n = readlink(dir, target, sizeof target - 1);
    if (S_ISLNK(st.st_mode) && n > 0) {
      Add(a, {"--symlink", std::string(target, static_cast<size_t>(n)), dir});
    } else if (S_ISDIR(st.st_mode)) {
      Add(a, {"--ro-bind", dir, dir});
    }
  }
  // What the loader, compilers and getpwuid need; nothing else from /etc.
  for (const char* f : {"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
                        "/etc/alternatives", "/etc/passwd", "/etc/group", "/etc/nsswitch.conf",
                        "/etc/localtime"}) {
    Add(a, {"--ro-bind-try", f, f});
  }
  // The CUDA toolkit when it lives outside /usr (/usr/local/cuda -> /opt/...).
  const std::string cuda = RealPath("/usr/local/cuda");
  if (!cuda.empty() && !PathIsUnder(cuda, "/usr")) Add(a, {"--ro-bind", cuda, cuda});
}

void AddGpu(Args* a) {
  if (DIR* dev = opendir("/dev")) {
    std::vector<std::string> nodes;
    while (struct dirent* e = readdir(dev)) {
      if (absl::StartsWith(e->d_name, "nvidia")) nodes.push_back(std::string("/dev/") + e->d_name);
    }
    closedir(dev);
    std::sort(nodes.begin(), nodes.end());
    for (const std::string& n : nodes) Add(a, {"--dev-bind", n, n});
  }
  Add(a, {"--ro-bind-try", "/proc/driver/nvidia", "/proc/driver/nvidia"});
  Add(a, {"--ro-bind", "/sys", "/sys"});
  for (const std::string& dir : DriverLibraryDirs()) {
    if (!PathIsUnder(dir, "/usr")) Add(a, {"--ro-bind", dir, dir});
  }
}

struct Mount {
  std::string source, target;
  bool writable = false;
  std::string link;  // the path as given, when it goes through a symlink
};

// A bind of a path through symlinks (/usr/local/cuda -> cuda-13.0) mounts the
// real directory at its real place, and recreates the given path as a
// symlink unless it lies in a system directory that is visible anyway.
Mount ResolvedMount(const std::string& source, const std::string& target, bool writable) {
  const std::string real = RealPath(source);
  if (!target.empty() || real.empty() || real == source) {
    return {source, target.empty() ? source : target, writable, ""};
  }
  const bool visible = PathIsUnder(source, "/usr") || PathIsUnder(source, "/etc");
  return {real, real, writable, visible ? "" : source};
}

// Spec.binds and work_dir, parents before children so none hides another.
std::vector<Mount> UserMounts(const Spec& spec) {
  std::vector<Mount> mounts;
  for (const Bind& b : spec.binds) mounts.push_back(ResolvedMount(b.source, b.target, b.writable));
  mounts.push_back(ResolvedMount(spec.work_dir, "", true));
  std::stable_sort(mounts.begin(), mounts.end(), [](const Mount& x, const Mount& y) {
    return std::count(x.target.begin(), x.target.end(), '/') <
           std::count(y.target.begin(), y.target.end(), '/');
  });
  return mounts;
}

}  // namespace

bool PathIsUnder(const std::string& path, const std::string& path_prefix) {
  if (!absl::StartsWith(path, path_prefix)) return false;
  return path.size() == path_prefix.size() || path[path_prefix.size()] == '/' ||
         path_prefix == "/";
}

std::vector<std::string> BwrapArgv(const Spec& spec, const Capabilities& caps,
                                   const std::vector<std::string>& inner_argv) {
  Args a = {caps.bwrap_path, "--unshare-user", "--unshare-pid", "--unshare-ipc",
            "--unshare-uts", "--unshare-cgroup-try"};
  if (!spec.network) a.push_back("--unshare-net");
  if (caps.bwrap_disable_userns) a.push_back("--disable-userns");
  Add(&a, {"--die-with-parent", "--new-session", "--cap-drop", "ALL", "--hostname", "sandbox"});
  AddSystemDirs(&a);
  if (spec.network) {
    for (const char* f : {"/etc/resolv.conf", "/etc/hosts"}) Add(&a, {"--ro-bind-try", f, f});
  }
  Add(&a, {"--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/dev/shm"});
  if (spec.gpu) AddGpu(&a);
  const std::vector<Mount> mounts = UserMounts(spec);
  for (const Mount& m : mounts) Add(&a, {m.writable ? "--bind" : "--ro-bind", m.source, m.target});
  for (const Mount& m : mounts) {
    if (!m.link.empty()) Add(&a, {"--symlink", m.source, m.link});
  }
  // The root is bwrap's own tmpfs: read-only, so only work_dir, /tmp and
  // /dev/shm (private tmpfs) take writes.
  Add(&a, {"--remount-ro", "/", "--chdir", spec.work_dir, "--"});
  a.insert(a.end(), inner_argv.begin(), inner_argv.end());
  return a;
}

}  // namespace anvil::sandbox::internal
