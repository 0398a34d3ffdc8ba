#include "worker/build_cache.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "proto/candidate.h"

namespace anvil {
namespace fs = std::filesystem;

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
                                              v1::Build build) const {
  std::string final_dir = EntryDir(key);
  std::string tmp = absl::StrCat(final_dir, ".tmp.", getpid(), ".", std::hash<std::string>{}(so_path));
  std::error_code ec;
  fs::create_directories(tmp, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", tmp, ": ", ec.message()));
  fs::copy_file(so_path, tmp + "/candidate.so", fs::copy_options::overwrite_existing, ec);
  if (ec) {
    fs::remove_all(tmp, ec);
    return absl::ResourceExhaustedError(absl::StrCat("cannot store build: ", ec.message()));
  }
  build.set_cache_key(key);
  build.set_artifact(final_dir + "/candidate.so");
  {
    std::ofstream out(tmp + "/build.pb", std::ios::binary);
    if (!build.SerializeToOstream(&out)) {
      fs::remove_all(tmp, ec);
      return absl::ResourceExhaustedError("cannot write build record (disk full?)");
    }
  }
  if (std::rename(tmp.c_str(), final_dir.c_str()) != 0) {
    fs::remove_all(tmp, ec);  // another builder published the same key first
  }
  return build;
}

}  // namespace anvil
