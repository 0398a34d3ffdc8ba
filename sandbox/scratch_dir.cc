// ScratchDir: a temporary directory removed without following symlinks. See
// sandbox.h. Removal works on file descriptors (openat/unlinkat with
// O_NOFOLLOW), so a symlink left by a job is removed, never its target; it
// makes read-only directories writable first; and it flattens very deep trees
// (a job can nest directories far deeper than we hold descriptors for) by
// moving deep subtrees up to the top level before going on.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "sandbox/sandbox.h"
#include "spdlog/spdlog.h"

namespace anvil::sandbox {
namespace {

constexpr int kMaxDepth = 64;

struct Remover {
  int top_fd = -1;
  int moved = 0;       // subtrees moved up to top_fd in this pass
  uint64_t serial = 0;  // names for them, unique over all passes
  std::string error;

  void Fail(const std::string& what) {
    if (error.empty()) error = absl::StrCat(what, ": ", strerror(errno));
  }

  std::vector<std::string> Names(int dir_fd) {
    std::vector<std::string> names;
    const int fd = dup(dir_fd);
    DIR* d = fd >= 0 ? fdopendir(fd) : nullptr;
    if (d == nullptr) {
      if (fd >= 0) close(fd);
      Fail("opendir");
      return names;
    }
    rewinddir(d);
    while (struct dirent* e = readdir(d)) {
      if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) names.push_back(e->d_name);
    }
    closedir(d);
    return names;
  }

  // Opens a subdirectory (never through a symlink), making it ours to empty.
  int OpenDir(int dir_fd, const std::string& name) {
    const int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
    int fd = openat(dir_fd, name.c_str(), flags);
    if (fd < 0 && errno == EACCES) {  // e.g. mode 0000: make it readable first
      fchmodat(dir_fd, name.c_str(), 0700, 0);
      fd = openat(dir_fd, name.c_str(), flags);
    }
    if (fd >= 0) fchmod(fd, 0700);  // read-only directories: entries become removable
    return fd;
  }

  void RemoveDir(int dir_fd, const std::string& name, int depth) {
    if (depth >= kMaxDepth && dir_fd != top_fd) {
      const std::string up = absl::StrCat(".anvil-deep-", serial++);
      ++moved;
      if (renameat(dir_fd, name.c_str(), top_fd, up.c_str()) != 0) Fail("rename " + name);
      return;
    }
    const int fd = OpenDir(dir_fd, name);
    if (fd < 0) {
      Fail("open " + name);
      return;
    }
    RemoveEntries(fd, depth + 1);
    close(fd);
    if (unlinkat(dir_fd, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOTEMPTY) {
      Fail("rmdir " + name);
    }
  }

  void RemoveEntries(int dir_fd, int depth) {
    for (const std::string& name : Names(dir_fd)) {
      if (unlinkat(dir_fd, name.c_str(), 0) == 0) continue;  // files and symlinks themselves
      if (errno == EISDIR || errno == EPERM) {
        RemoveDir(dir_fd, name, depth);
      } else if (errno != ENOENT) {
        Fail("unlink " + name);
      }
    }
  }
};

absl::Status RemoveTree(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return absl::InternalError(absl::StrCat("open ", path, ": ", strerror(errno)));
  }
  fchmod(fd, 0700);
  Remover r;
  r.top_fd = fd;
  for (int pass = 0; pass < 100000 && r.error.empty(); ++pass) {
    r.moved = 0;
    r.RemoveEntries(fd, 0);
    if (r.moved == 0) break;  // nothing was too deep: done
  }
  close(fd);
  if (r.error.empty() && rmdir(path.c_str()) != 0) r.Fail("rmdir " + path);
  if (!r.error.empty()) return absl::InternalError(absl::StrCat("removing ", path, ": ", r.error));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ScratchDir> ScratchDir::Create(absl::string_view parent, absl::string_view prefix) {
  if (parent.empty() || absl::StrContains(prefix, '/')) {
    return absl::InvalidArgumentError("ScratchDir: parent required, prefix without '/'");
  }
  std::string templ = absl::StrCat(parent, "/", prefix, "XXXXXX");
  if (mkdtemp(templ.data()) == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot create a scratch directory in ", parent, ": ", strerror(errno)));
  }
  // Searchable, not listable: a job running as another uid can reach a
  // scratch directory nested in this one, but cannot list its siblings.
  chmod(templ.c_str(), 0711);
  return ScratchDir(std::move(templ));
}

ScratchDir::ScratchDir(ScratchDir&& other) noexcept : path_(std::move(other.path_)) {
  other.path_.clear();
}

ScratchDir& ScratchDir::operator=(ScratchDir&& other) noexcept {
  if (this != &other) {
    Remove().IgnoreError();
    path_ = std::move(other.path_);
    other.path_.clear();
  }
  return *this;
}

ScratchDir::~ScratchDir() {
  if (absl::Status s = Remove(); !s.ok()) spdlog::warn("sandbox: {}", s.ToString());
}

absl::Status ScratchDir::Remove() {
  if (path_.empty()) return absl::OkStatus();
  absl::Status s = RemoveTree(path_);
  path_.clear();
  return s;
}

}  // namespace anvil::sandbox
