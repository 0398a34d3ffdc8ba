#include "worker/build_cache.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "proto/candidate.h"
#include "sandbox/sandbox.h"

namespace anvil {
namespace fs = std::filesystem;

namespace {

// Files of an entry: readable by the job's uid whatever the caller's umask.
constexpr fs::perms kDirPerms = fs::perms(0755);
constexpr fs::perms kFilePerms = fs::perms(0644);

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v == '/' ? std::string(v) : std::string();
}

// Creates dir and its missing parents with mode 0755 (umask aside).
absl::Status MakeDirs(const fs::path& dir) {
  std::error_code ec;
  if (fs::is_directory(dir, ec)) return absl::OkStatus();
  if (dir.has_parent_path() && dir.parent_path() != dir) {
    if (absl::Status s = MakeDirs(dir.parent_path()); !s.ok()) return s;
  }
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return absl::FailedPreconditionError(absl::StrCat("cannot create '", dir.string(), "': ",
                                                      strerror(errno)));
  }
  chmod(dir.c_str(), 0755);
  return absl::OkStatus();
}

// Every component below a directory others may write to (mode o+w, e.g.
// /tmp) must be a real directory of ours or root's, writable only by its owner.
absl::Status CheckNotSwappable(const fs::path& dir) {
  for (fs::path p = dir; p.has_parent_path() && p != p.parent_path(); p = p.parent_path()) {
    struct stat parent, own;
    if (stat(p.parent_path().c_str(), &parent) != 0 || !(parent.st_mode & S_IWOTH)) continue;
    if (lstat(p.c_str(), &own) != 0 || !S_ISDIR(own.st_mode) ||
        (own.st_uid != geteuid() && own.st_uid != 0) ||
        (own.st_mode & (S_IWGRP | S_IWOTH))) {
      return absl::FailedPreconditionError(absl::StrCat(
          "'", p.string(), "' lies in the shared directory '", p.parent_path().string(),
          "' but is not a directory of uid ", geteuid(), " or root writable only by its owner: another user "
          "could swap the kernels the runner loads (remove it, or set ANVIL_CACHE elsewhere)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string DefaultBuildCacheDir() {
  if (const std::string c = Env("ANVIL_CACHE"); !c.empty()) return c;
  if (geteuid() != 0) {
    if (const std::string x = Env("XDG_CACHE_HOME"); !x.empty()) return x + "/anvil/builds";
    if (const std::string h = Env("HOME"); !h.empty() && h != "/") return h + "/.cache/anvil/builds";
  }
  return absl::StrCat("/var/tmp/anvil-", geteuid(), "/builds");
}

absl::Status PrepareBuildCacheDir(const std::string& dir) {
  const std::string fix = "set ANVIL_CACHE to a directory the sandbox's jobs can reach, e.g. "
                          "/var/tmp/anvil-cache";
  if (dir.empty() || dir[0] != '/') {
    return absl::InvalidArgumentError(absl::StrCat("build cache '", dir, "' must be an absolute path"));
  }
  if (absl::Status s = MakeDirs(dir); !s.ok()) {
    return absl::FailedPreconditionError(absl::StrCat("build cache: ", s.message(), "; ", fix));
  }
  if (absl::Status s = CheckNotSwappable(dir); !s.ok()) {
    return absl::FailedPreconditionError(absl::StrCat("build cache: ", s.message()));
  }
  if (access(dir.c_str(), W_OK | X_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("build cache '", dir, "' is not writable by uid ", geteuid(), "; ", fix));
  }
  struct stat st;
  if (stat(dir.c_str(), &st) == 0 && st.st_uid == geteuid() && (st.st_mode & 0111) != 0111) {
    chmod(dir.c_str(), (st.st_mode & 07777) | 0111);  // the jobs pass through it
  }
  if (absl::Status s = sandbox::CheckReachableByJobs(dir + "/entry"); !s.ok()) {
    return absl::FailedPreconditionError(absl::StrCat("build cache: ", s.message(), "; or ", fix));
  }
  return absl::OkStatus();
}

std::string BuildCache::Key(absl::string_view nvcc_version, absl::string_view arch,
                            absl::string_view flags, absl::string_view source) {
  return Sha256Hex(absl::StrCat("nvcc=", nvcc_version, "\narch=", arch, "\nflags=", flags,
                                "\n", NormaliseSource(source)));
}

std::string BuildCache::EntryDir(const std::string& key) const {
  return absl::StrCat(dir_, "/", key.substr(0, 2), "/", key);
}

std::optional<v1::Build> BuildCache::Lookup(const std::string& key) const {
  std::string dir = EntryDir(key);
  std::ifstream in(dir + "/build.pb", std::ios::binary);
  v1::Build build;
  if (!in || !build.ParseFromIstream(&in) || !fs::exists(dir + "/candidate.so")) {
    return std::nullopt;
  }
  build.set_artifact(dir + "/candidate.so");
  build.set_cache_hit(true);
  return build;
}

absl::StatusOr<v1::Build> BuildCache::Publish(const std::string& key, const std::string& so_path,
                                              v1::Build build, absl::string_view log) const {
  std::string final_dir = EntryDir(key);
  std::string tmp = absl::StrCat(final_dir, ".tmp.", getpid(), ".", std::hash<std::string>{}(so_path));
  std::error_code ec;
  fs::create_directories(tmp, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", tmp, ": ", ec.message()));
  fs::permissions(fs::path(final_dir).parent_path(), kDirPerms, ec);
  fs::permissions(tmp, kDirPerms, ec);
  fs::copy_file(so_path, tmp + "/candidate.so", fs::copy_options::overwrite_existing, ec);
  if (ec) {
    fs::remove_all(tmp, ec);
    return absl::ResourceExhaustedError(absl::StrCat("cannot store build: ", ec.message()));
  }
  fs::permissions(tmp + "/candidate.so", kFilePerms, ec);
  build.set_cache_key(key);
  build.set_artifact(final_dir + "/candidate.so");
  {
    std::ofstream out(tmp + "/build.pb", std::ios::binary);
    if (!build.SerializeToOstream(&out)) {
      fs::remove_all(tmp, ec);
      return absl::ResourceExhaustedError("cannot write build record (disk full?)");
    }
  }
  {
    std::ofstream out(tmp + "/build.log");
    out << log;
    if (!out) {
      fs::remove_all(tmp, ec);
      return absl::ResourceExhaustedError("cannot write build log (disk full?)");
    }
  }
  fs::permissions(tmp + "/build.pb", kFilePerms, ec);
  fs::permissions(tmp + "/build.log", kFilePerms, ec);
  if (std::rename(tmp.c_str(), final_dir.c_str()) != 0) {
    fs::remove_all(tmp, ec);  // another builder published the same key first
  }
  return build;
}

}  // namespace anvil
