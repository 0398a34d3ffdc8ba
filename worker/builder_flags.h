// The builder's nvcc flags, split into the parts a unity build takes apart
// (worker/BUILDS.md). Internal to worker/builder*.cc. Pure; thread-safe.
#ifndef ANVIL_WORKER_BUILDER_FLAGS_H_
#define ANVIL_WORKER_BUILDER_FLAGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "anvil/v1/types.pb.h"
#include "worker/toolchain.h"
#include "worker/unity_source.h"

namespace anvil::builder_internal {

// A candidate's nvcc flags in the parts a unity build takes apart. All() is
// the list Build uses (and the cache key hashes): head, -shared, tail, the
// layout and param macros as -D flags, the candidate's own flags.
struct FlagSet {
  std::vector<std::string> head, tail;
  MacroDefines defines;
  std::vector<std::string> extra;

  std::vector<std::string> All() const;
  // For nvcc -c of a unity translation unit, which #defines the macros itself.
  std::vector<std::string> Object() const;
  // Whether the candidate's own flags define macros (it is then built alone).
  bool ExtraDefines() const;
};

// The flags for `c`; InvalidArgument for an arch, layout, param or flag
// outside the allowlist (anything else could reach the host toolchain).
absl::StatusOr<FlagSet> MakeFlags(const v1::Candidate& c, const Toolchain& toolchain);

// The candidate's arch, sm_90a when it names none.
std::string ArchOf(const v1::Candidate& c);

}  // namespace anvil::builder_internal

#endif  // ANVIL_WORKER_BUILDER_FLAGS_H_
