#include "tools/soak/jobs.h"

#include <cstdlib>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "proto/candidate.h"
#include "proto/problem.h"
#include "tools/soak/fixtures.h"

namespace anvil {
namespace {

constexpr const char* kBlocks[] = {"8", "16", "32"};

}  // namespace

absl::StatusOr<SeedFamily> LoadNaiveSeed(const std::string& seeds_dir) {
  absl::StatusOr<std::vector<SeedFamily>> seeds = LoadSeeds(seeds_dir);
  if (!seeds.ok()) return seeds.status();
  for (SeedFamily& f : *seeds) {
    if (f.name == "01_naive") return std::move(f);
  }
  return absl::NotFoundError(absl::StrCat("no 01_naive seed in ", seeds_dir));
}

v1::Candidate FreshNaiveCandidate(const SeedFamily& naive, int n, const std::string& nonce) {
  v1::Candidate c = MakeSeedCandidate(naive, n % 2 ? v1::LAYOUT_NN : v1::LAYOUT_NT,
                                      {{"BLOCK", kBlocks[(n / 2) % 3]}});
  c.set_source(absl::StrCat(c.source(), "\n// anvil-soak build ", n, " of run ", nonce, "\n"));
  AssignCandidateId(c);
  c.set_name(CandidateDisplayName(c));
  return c;
}

std::vector<v1::Candidate> PassingCandidates(const SeedFamily& naive) {
  std::vector<v1::Candidate> out;
  for (v1::Layout layout : {v1::LAYOUT_NT, v1::LAYOUT_NN}) {
    for (const char* block : kBlocks) out.push_back(MakeSeedCandidate(naive, layout, {{"BLOCK", block}}));
  }
  return out;
}

std::vector<v1::Shape> PassingShapes() {
  return {FixtureShape(), *ParseShape("64x64x64"), *ParseShape("256x128x128")};
}

BuilderOptions SoakBuilderOptions(const Toolchain& t, const std::string& cache_dir,
                                  const std::string& scratch_dir, int jobs, bool isolate) {
  BuilderOptions b;
  b.toolchain = t;
  b.cache_dir = cache_dir;
  b.scratch_dir = scratch_dir;
  b.jobs = jobs;
  b.timeout = absl::Seconds(120);
  // The soak measures the node as it is and reports the protections it got.
  b.isolation = isolate ? sandbox::Isolation::kAuto : sandbox::Isolation::kNone;
  return b;
}

RunnerHostOptions SoakRunnerOptions(const SoakOptions& o, const Toolchain& t,
                                      const std::string& scratch_dir, bool isolate) {
  RunnerHostOptions e;
  e.toolchain = t;
  e.scratch_dir = scratch_dir;
  e.device = o.device;
  e.protocol = FixtureProtocol();
  e.limits.startup_timeout = absl::Seconds(o.startup_timeout_s);
  e.limits.problem_timeout = absl::Seconds(o.problem_timeout_s);
  e.isolation = isolate ? sandbox::Isolation::kAuto : sandbox::Isolation::kNone;
  return e;
}

void DropCacheEntry(const v1::Build& b) {
  if (b.artifact().empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(std::filesystem::path(b.artifact()).parent_path(), ec);
}

double SecondsSince(absl::Time start) { return absl::ToDoubleSeconds(absl::Now() - start); }

std::string DefaultScratchParent() {
  const char* t = std::getenv("TMPDIR");
  return t != nullptr && *t == '/' ? t : "/tmp";
}

}  // namespace anvil
