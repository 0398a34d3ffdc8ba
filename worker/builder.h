// Builder: compiles candidates with nvcc, each in its own sandboxed process
// bounded in time and memory, into shared objects exporting the candidate ABI.
// Checks the source policy first, parses the ptxas report, trims compile
// errors, and serves repeated builds from a content-addressed cache.
// Thread-safe: Build may be called from many threads; BuildAll runs up to
// Options::jobs compiles at once.
#ifndef ANVIL_WORKER_BUILDER_H_
#define ANVIL_WORKER_BUILDER_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "anvil/v1/types.pb.h"
#include "sandbox/sandbox.h"
#include "worker/build_cache.h"
#include "worker/toolchain.h"

namespace anvil {

// Parallel builds when none are named: one per two cores, at least one
// (`anvil optimize --build-jobs`, a fleet worker's --build-slots).
int DefaultBuildJobs();

struct BuilderOptions {
  Toolchain toolchain;
  std::string cache_dir;                          // build cache root (created)
  std::string scratch_dir = "/tmp";               // parent of per-build scratch dirs
  int jobs = 2;                                   // parallel nvcc processes in BuildAll
  absl::Duration timeout = absl::Seconds(240);    // wall clock per compile
  int64_t address_space_bytes = int64_t(16) << 30;  // RLIMIT_AS for nvcc
  // kNamespaces: a build never runs without them (Run fails where the node
  // refuses them). kAuto only where the user allowed running without
  // (--allow-no-isolation); kNone for measurements of the sandbox's cost.
  sandbox::Isolation isolation = sandbox::Isolation::kNamespaces;
};

class Builder {
 public:
  explicit Builder(BuilderOptions options);

  // The full nvcc flag list for `c` (arch, layout macro, knobs, includes).
  // Fails with InvalidArgument for params or flags outside the allowlist.
  absl::StatusOr<std::vector<std::string>> Flags(const v1::Candidate& c) const;
  // Builds one candidate. A candidate's own failure (policy, compile error,
  // timeout) is an OK Build with that verdict; non-OK means Anvil failed.
  // `cancelled` (empty: never) is polled while nvcc runs: true kills it and
  // the call answers Cancelled (nothing is cached).
  absl::StatusOr<v1::Build> Build(const v1::Candidate& c,
                                  const std::function<bool()>& cancelled = nullptr) const;
  // results[i] answers candidates[i]; those not started before `cancelled`
  // turned true answer Cancelled. `built` (optional) is called as each ends,
  // from the building thread.
  std::vector<absl::StatusOr<v1::Build>> BuildAll(
      const std::vector<v1::Candidate>& candidates, const std::function<bool()>& cancelled = nullptr,
      const std::function<void(size_t, const absl::StatusOr<v1::Build>&)>& built = nullptr) const;

 private:
  absl::StatusOr<v1::Build> Compile(const v1::Candidate& c, const std::vector<std::string>& flags,
                                    const std::string& key, const std::function<bool()>& cancelled) const;
  BuilderOptions options_;
  BuildCache cache_;
};

}  // namespace anvil

#endif  // ANVIL_WORKER_BUILDER_H_
