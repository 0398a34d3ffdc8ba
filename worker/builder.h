// Builder: compiles candidates with nvcc, each in its own sandboxed process
// bounded in time and memory, into shared objects exporting the candidate ABI.
// Checks the source policy first, parses the ptxas report, trims compile
// errors, and serves repeated builds from a content-addressed cache.
// Thread-safe: Build may be called from many threads; BuildAll runs up to
// Options::jobs compiles at once.
//
// Unity builds (worker/BUILDS.md). Candidates of a seed family share one
// source text and differ only in their -DANVIL_<KNOB> params, and most of a
// compile is the front end reading the same headers again. BuildAll therefore
// compiles candidates that share the source text, layout, arch and extra flags
// (and whose headers would see the same macros: UnitySource) up to
// Options::unity at a time in ONE sandboxed nvcc run: one translation unit
// holding, after the headers, each configuration's copy of the source in a
// namespace of its own with its knobs #defined and its ABI functions renamed
// (UnityTranslationUnit), compiled once to an object (nvcc -c); each candidate
// then gets its own shared object, linked from that object with its renamed
// functions exported under the ABI names, and its own ptxas report (kernels
// told apart by their namespace). Any failure of the shared compile (one
// configuration's static_assert, a limit, a timeout) builds that group's
// candidates one by one, exactly as Build would, so each gets its own verdict
// and error text. Cache keys do not change: a candidate's key is its source,
// flags, nvcc version and arch whichever way it is built, and a hit is a hit
// either way. A unity-built shared object also holds its group's other
// configurations as code it never calls; every instruction the candidate runs
// is compiled from its own key's source and macros.
#ifndef ANVIL_WORKER_BUILDER_H_
#define ANVIL_WORKER_BUILDER_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "anvil/v1/types.pb.h"
#include "sandbox/sandbox.h"
#include "worker/build_cache.h"
#include "worker/toolchain.h"
#include "worker/unity_source.h"

namespace anvil {

// Parallel builds when none are named: one per two cores, at least one
// (`anvil optimize --build-jobs`, a fleet worker's --build-slots).
int DefaultBuildJobs();

struct BuilderOptions {
  Toolchain toolchain;
  std::string cache_dir;                          // build cache root (created)
  std::string scratch_dir = "/tmp";               // parent of per-build scratch dirs
  int jobs = 2;                                   // parallel nvcc processes in BuildAll
  // Most configurations of one source BuildAll compiles in one nvcc run (a
  // unity build); 1: every candidate alone. Groups are made smaller when that
  // keeps all `jobs` busy.
  int unity = 8;
  absl::Duration timeout = absl::Seconds(240);    // wall clock per compile (x N for a group of N)
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
  // Builds one candidate alone. A candidate's own failure (policy, compile
  // error, timeout) is an OK Build with that verdict; non-OK means Anvil
  // failed. `cancelled` (empty: never) is polled while nvcc runs: true kills it
  // and the call answers Cancelled (nothing is cached).
  absl::StatusOr<v1::Build> Build(const v1::Candidate& c,
                                  const std::function<bool()>& cancelled = nullptr) const;
  // Builds them all on Options::jobs threads, in unity groups where it can
  // (above). results[i] answers candidates[i], with the verdict, error text
  // and cache key Build would give it; those not started before `cancelled`
  // turned true answer Cancelled (a group's candidates start together).
  // `built` (if set) is called with (i, results[i]) as each build ends, from
  // the thread that built it (a group's candidates as the group ends).
  std::vector<absl::StatusOr<v1::Build>> BuildAll(
      const std::vector<v1::Candidate>& candidates,
      const std::function<bool()>& cancelled = nullptr,
      const std::function<void(size_t, const absl::StatusOr<v1::Build>&)>& built = nullptr) const;

 private:
  // Candidates BuildAll compiles in one unity translation unit (same source
  // text, layout, arch, extra flags and prelude): indices into its input.
  struct Group {
    std::shared_ptr<const UnitySource> source;
    std::string prelude;                     // UnitySource::Prelude, the same for all
    std::vector<std::string> object_flags;   // Flags() less -shared and the knob macros
    std::vector<size_t> members;
  };
  struct Plan {
    std::vector<Group> groups;
    std::vector<std::pair<size_t, std::string>> alone;  // built one by one, with a note for the log
  };
  // One configuration of a group: the candidates of one cache key.
  struct GroupConfig {
    std::vector<size_t> members;
    std::vector<std::string> flags;  // Flags(), as Build would use them
    MacroDefines defines;            // its layout and params, as those flags define them
    std::string key;
  };
  // A group's outcome per configuration: a Build, or nullopt and why[k] to
  // build it alone (the group's compile or its own link failed).
  struct GroupResult {
    std::vector<std::optional<absl::StatusOr<v1::Build>>> builds;
    std::vector<std::string> why;
  };
  using BuiltFn = std::function<void(size_t, absl::StatusOr<v1::Build>)>;

  absl::StatusOr<v1::Build> BuildAlone(const v1::Candidate& c, const std::function<bool()>& cancelled,
                                       const std::string& note) const;
  absl::StatusOr<v1::Build> Compile(const v1::Candidate& c, const std::vector<std::string>& flags,
                                    const std::string& key, const std::function<bool()>& cancelled,
                                    const std::string& note) const;
  // A sandboxed nvcc run in `dir` with the builder's limits (argv left to the caller).
  sandbox::Spec NvccSpec(const std::string& dir, const std::function<bool()>& cancelled) const;
  Plan MakePlan(const std::vector<v1::Candidate>& candidates) const;
  // Answers a group's candidates through `built` (cache hits, its unity
  // build); returns those to build alone, each with a note for its log.
  std::vector<std::pair<size_t, std::string>> BuildGroup(const Group& group,
                                                         const std::vector<v1::Candidate>& candidates,
                                                         const std::function<bool()>& cancelled,
                                                         const BuiltFn& built) const;
  // builder_unity.cc: one nvcc -c of the group's translation unit, then a
  // link per configuration. Cancelled when `cancelled` stopped it.
  absl::StatusOr<GroupResult> CompileGroup(const Group& group, const v1::Candidate& first,
                                           const std::vector<GroupConfig>& configs,
                                           const std::function<bool()>& cancelled) const;
  // Links member k's shared object from the group's object in `dir` and
  // publishes it into result->builds[k] (or says in why[k] why it failed).
  // Non-OK: cancelled, or the sandbox failed.
  absl::Status LinkMember(const std::string& dir, size_t k, const std::vector<GroupConfig>& configs,
                          const v1::Candidate& first, double compile_s,
                          const std::vector<v1::KernelUsage>& usage, const std::function<bool()>& cancelled,
                          GroupResult* result) const;

  BuilderOptions options_;
  BuildCache cache_;
};

}  // namespace anvil

#endif  // ANVIL_WORKER_BUILDER_H_
