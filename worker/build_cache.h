// A content-addressed cache of built candidates: key = hash of nvcc version,
// arch, flags and source, however the candidate was built (alone or in a
// unity group, worker/BUILDS.md). A hit returns the stored Build and its shared object
// without running nvcc. Entries are published by an atomic directory rename,
// so concurrent builders of one key never see half an entry. Thread-safe.
#ifndef ANVIL_WORKER_BUILD_CACHE_H_
#define ANVIL_WORKER_BUILD_CACHE_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "anvil/v1/types.pb.h"

namespace anvil {

// The build cache when none is configured: $ANVIL_CACHE; for root
// /var/tmp/anvil-0/builds (the sandbox's uid 65534 must read the built
// libraries, and cannot reach into root's 0700 home); else
// $XDG_CACHE_HOME/anvil/builds or ~/.cache/anvil/builds (jobs run as the
// caller), or /var/tmp/anvil-<uid>/builds without HOME.
std::string DefaultBuildCacheDir();

// Creates `dir` (missing components mode 0755) and checks, before any work
// starts, that the sandbox's jobs can read from it: FailedPrecondition naming
// the directory and the fix otherwise. A component in a directory others may
// write to (/tmp, /var/tmp) must be the caller's or root's, writable only by
// its owner: another user could otherwise swap in the libraries the runner loads.
absl::Status PrepareBuildCacheDir(const std::string& dir);

class BuildCache {
 public:
  explicit BuildCache(std::string dir) : dir_(std::move(dir)) {}

  static std::string Key(absl::string_view nvcc_version, absl::string_view arch,
                         absl::string_view flags, absl::string_view source);
  // The stored build, with artifact pointing into the cache, or nullopt.
  std::optional<v1::Build> Lookup(const std::string& key) const;
  // Moves `so_path` into the cache under `key` and records `build`
  // (artifact rewritten) and `log`, how it was built (build.log beside the
  // shared object: alone, or in a unity group of N). Returns the stored build.
  absl::StatusOr<v1::Build> Publish(const std::string& key, const std::string& so_path,
                                    v1::Build build, absl::string_view log = "") const;
  const std::string& dir() const { return dir_; }

 private:
  std::string EntryDir(const std::string& key) const;
  std::string dir_;
};

}  // namespace anvil

#endif  // ANVIL_WORKER_BUILD_CACHE_H_
