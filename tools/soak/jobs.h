// The pieces a soak's jobs are made of: candidates from the naive seed (a
// fresh one per build, so the build cache cannot answer it), the problems
// passing evaluations use, and the builder and evaluator settings.
// Shared by soak.cc and overhead.cc. Pure functions; thread-safe.
#ifndef ANVIL_TOOLS_SOAK_JOBS_H_
#define ANVIL_TOOLS_SOAK_JOBS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "anvil/v1/types.pb.h"
#include "seeds/seeds.h"
#include "worker/builder.h"
#include "worker/runner_host.h"
#include "tools/soak/options.h"

namespace anvil {

// seeds/01_naive from `seeds_dir`.
absl::StatusOr<SeedFamily> LoadNaiveSeed(const std::string& seeds_dir);

// The naive seed: layout and block size vary with n; a comment naming n and
// `nonce` makes every (n, nonce) a different source, hence a real nvcc run.
v1::Candidate FreshNaiveCandidate(const SeedFamily& naive, int n, const std::string& nonce);

// The six naive variants (both layouts, three block sizes) passing jobs evaluate.
std::vector<v1::Candidate> PassingCandidates(const SeedFamily& naive);

// Small problems for passing jobs, tails included.
std::vector<v1::Shape> PassingShapes();

BuilderOptions SoakBuilderOptions(const Toolchain& t, const std::string& cache_dir,
                                  const std::string& scratch_dir, int jobs, bool isolate);
RunnerHostOptions SoakRunnerOptions(const SoakOptions& o, const Toolchain& t,
                                      const std::string& scratch_dir, bool isolate);

// Deletes a build's cache entry (the folder of its artifact): builds that
// are not evaluated again would otherwise fill the disk.
void DropCacheEntry(const v1::Build& b);

double SecondsSince(absl::Time start);

// $TMPDIR when absolute, else /tmp.
std::string DefaultScratchParent();

}  // namespace anvil

#endif  // ANVIL_TOOLS_SOAK_JOBS_H_
