// A content-addressed cache of built candidates: key = hash of nvcc version,
// arch, flags and source. A hit returns the stored Build and its shared object
// without running nvcc. Entries are published by an atomic directory rename,
// so concurrent builders of one key never see half an entry. Thread-safe.
#ifndef ANVIL_WORKER_BUILD_CACHE_H_
#define ANVIL_WORKER_BUILD_CACHE_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "anvil/v1/types.pb.h"

namespace anvil {

class BuildCache {
 public:
  explicit BuildCache(std::string dir) : dir_(std::move(dir)) {}

  static std::string Key(absl::string_view nvcc_version, absl::string_view arch,
                         absl::string_view flags, absl::string_view source);
  // The stored build, with artifact pointing into the cache, or nullopt.
  std::optional<v1::Build> Lookup(const std::string& key) const;
  // Moves `so_path` into the cache under `key` and records `build`
  // (artifact rewritten). Returns the stored build.
  absl::StatusOr<v1::Build> Publish(const std::string& key, const std::string& so_path,
                                    v1::Build build) const;
  const std::string& dir() const { return dir_; }

 private:
  std::string EntryDir(const std::string& key) const;
  std::string dir_;
};

}  // namespace anvil

#endif  // ANVIL_WORKER_BUILD_CACHE_H_
