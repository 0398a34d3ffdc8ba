#include "worker/builder.h"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "sandbox/sandbox.h"
#include "worker/compile_log.h"
#include "worker/ptxas.h"

namespace anvil {
namespace {

// Extra flags a candidate may carry; anything else could reach the host
// toolchain (plugins, output paths, includes outside the allowlist).
bool AllowedFlag(const std::string& f) {
  static const std::regex kAllowed(
      R"(-D[A-Za-z_][A-Za-z0-9_]*(=[A-Za-z0-9_.+-]*)?|-maxrregcount=[0-9]{1,3}|)"
      R"(--expt-relaxed-constexpr|--use_fast_math|-Xptxas=-O[0-3])");
  return std::regex_match(f, kAllowed);
}

bool AllowedParam(const std::string& k, const std::string& v) {
  static const std::regex kKey("[A-Z][A-Z0-9_]{0,47}");
  static const std::regex kValue("[A-Za-z0-9_.+-]{1,64}");
  return std::regex_match(k, kKey) && std::regex_match(v, kValue);
}

// A build refused before nvcc: stored like any other (it names its candidate).
v1::Build Failed(const v1::Candidate& c, v1::Verdict verdict, std::string error) {
  v1::Build b;
  b.set_candidate_id(c.id());
  b.set_arch(c.arch().empty() ? "sm_90a" : c.arch());
  b.set_verdict(verdict);
  b.set_error(std::move(error));
  return b;
}

}  // namespace

int DefaultBuildJobs() { return std::max(1, static_cast<int>(std::thread::hardware_concurrency() / 2)); }

Builder::Builder(BuilderOptions options)
    : options_(std::move(options)), cache_(options_.cache_dir) {
  std::error_code ec;
  std::filesystem::create_directories(options_.cache_dir, ec);
}

absl::StatusOr<std::vector<std::string>> Builder::Flags(const v1::Candidate& c) const {
  const std::string arch = c.arch().empty() ? "sm_90a" : c.arch();
  if (arch != "sm_90a" && arch != "sm_90") {
    return absl::InvalidArgumentError(absl::StrCat("arch '", arch, "' must be sm_90a or sm_90"));
  }
  const std::string compute = arch == "sm_90a" ? "compute_90a" : "compute_90";
  std::vector<std::string> flags = {
      "-std=c++17", "-O3", "-shared", "-Xcompiler", "-fPIC", "--cudart", "shared", "-lineinfo",
      "-Xptxas", "-v", absl::StrCat("-gencode=arch=", compute, ",code=", arch)};
  if (!options_.toolchain.cutlass_dir.empty()) {
    flags.push_back("-I" + options_.toolchain.cutlass_dir + "/include");
    flags.push_back("-I" + options_.toolchain.cutlass_dir + "/tools/util/include");
  }
  if (c.layout() != v1::LAYOUT_NT && c.layout() != v1::LAYOUT_NN) {
    return absl::InvalidArgumentError("candidate layout must be nt or nn");
  }
  flags.push_back(c.layout() == v1::LAYOUT_NT ? "-DANVIL_LAYOUT_NT=1" : "-DANVIL_LAYOUT_NN=1");
  std::map<std::string, std::string> params(c.params().begin(), c.params().end());
  for (const auto& [k, v] : params) {
    if (!AllowedParam(k, v)) {
      return absl::InvalidArgumentError(absl::StrCat("parameter ", k, "=", v, " is not allowed"));
    }
    flags.push_back(absl::StrCat("-DANVIL_", k, "=", v));
  }
  for (absl::string_view f : absl::StrSplit(c.flags(), ' ', absl::SkipEmpty())) {
    if (!AllowedFlag(std::string(f))) {
      return absl::InvalidArgumentError(absl::StrCat("nvcc flag '", f, "' is not allowed"));
    }
    flags.emplace_back(f);
  }
  return flags;
}

absl::StatusOr<v1::Build> Builder::Build(const v1::Candidate& c,
                                         const std::function<bool()>& cancelled) const {
  absl::StatusOr<std::vector<std::string>> flags = Flags(c);
  if (!flags.ok()) return Failed(c, v1::VERDICT_REJECTED, std::string(flags.status().message()));
  absl::StatusOr<std::vector<sandbox::PolicyViolation>> violations =
      sandbox::CheckSource(c.source(), sandbox::SourcePolicy{});
  if (!violations.ok()) return violations.status();
  if (!violations->empty()) {
    std::string why;
    for (const sandbox::PolicyViolation& v : *violations) {
      absl::StrAppend(&why, v.message, "\n");
    }
    return Failed(c, v1::VERDICT_REJECTED, why);
  }
  const std::string flag_text = absl::StrJoin(*flags, " ");
  const std::string key = BuildCache::Key(options_.toolchain.nvcc_version,
                                          c.arch().empty() ? "sm_90a" : c.arch(), flag_text,
                                          c.source());
  if (std::optional<v1::Build> hit = cache_.Lookup(key)) {
    hit->set_candidate_id(c.id());
    return *hit;
  }
  if (cancelled && cancelled()) return absl::CancelledError(absl::StrCat("build of ", c.id(), " cancelled"));
  return Compile(c, *flags, key, cancelled);
}

absl::StatusOr<v1::Build> Builder::Compile(const v1::Candidate& c,
                                           const std::vector<std::string>& flags,
                                           const std::string& key,
                                           const std::function<bool()>& cancelled) const {
  absl::StatusOr<sandbox::ScratchDir> scratch =
      sandbox::ScratchDir::Create(options_.scratch_dir, "anvil-build-");
  if (!scratch.ok()) return scratch.status();
  const std::string dir = scratch->path();
  {
    std::ofstream src(dir + "/candidate.cu");
    src << c.source();
    if (!src) return absl::ResourceExhaustedError("cannot write the candidate source (disk full?)");
  }
  sandbox::Spec spec;
  spec.argv = {options_.toolchain.nvcc};
  spec.argv.insert(spec.argv.end(), flags.begin(), flags.end());
  for (const char* a : {"-o", "candidate.so", "candidate.cu"}) spec.argv.emplace_back(a);
  spec.env = {absl::StrCat("PATH=", options_.toolchain.cuda_root, "/bin:/usr/bin:/bin"),
              "HOME=" + dir, "TMPDIR=" + dir, "LC_ALL=C"};
  spec.work_dir = dir;
  spec.binds.push_back({options_.toolchain.cuda_root, "", false});
  if (!options_.toolchain.cutlass_dir.empty()) {
    spec.binds.push_back({options_.toolchain.cutlass_dir, "", false});
  }
  spec.limits.wall_time = options_.timeout;
  spec.limits.address_space_bytes = options_.address_space_bytes;
  spec.limits.file_size_bytes = int64_t(1) << 30;
  spec.limits.output_cap_bytes = 256 * 1024;
  spec.isolation = options_.isolation;
  spec.cancelled = cancelled;
  absl::StatusOr<sandbox::Result> run = sandbox::Run(spec);
  if (!run.ok()) return run.status();
  if (run->cancelled) return absl::CancelledError(absl::StrCat("build of ", c.id(), " cancelled"));

  v1::Build build;
  build.set_candidate_id(c.id());
  build.set_flags(absl::StrJoin(flags, " "));
  build.set_nvcc_version(options_.toolchain.nvcc_version);
  build.set_arch(c.arch().empty() ? "sm_90a" : c.arch());
  build.set_seconds(run->wall_seconds);
  const std::string output = run->stdout_text + run->stderr_text;
  for (v1::KernelUsage& k : ParsePtxasReport(output)) *build.add_usage() = std::move(k);
  if (run->timed_out || run->exit_code != 0 ||
      !std::filesystem::exists(dir + "/candidate.so")) {
    build.set_verdict(v1::VERDICT_COMPILE_ERROR);
    std::string log = TrimCompileLog(output, dir);
    if (run->timed_out || run->term_signal != 0 || run->stderr_truncated) {
      absl::StrAppend(&log, "nvcc: ", run->Describe(),
                      run->stderr_truncated ? " (output truncated)" : "", "\n");
    }
    build.set_error(log);
    return build;
  }
  build.set_verdict(v1::VERDICT_PASSED);
  return cache_.Publish(key, dir + "/candidate.so", build);
}

std::vector<absl::StatusOr<v1::Build>> Builder::BuildAll(
    const std::vector<v1::Candidate>& candidates, const std::function<bool()>& cancelled,
    const std::function<void(size_t, const absl::StatusOr<v1::Build>&)>& built) const {
  std::vector<absl::StatusOr<v1::Build>> results(candidates.size(),
                                                 absl::UnknownError("not built"));
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < candidates.size(); i = next++) {
      results[i] = Build(candidates[i], cancelled);
      if (built) built(i, results[i]);
    }
  };
  std::vector<std::thread> threads;
  int n = std::max(1, std::min<int>(options_.jobs, static_cast<int>(candidates.size())));
  for (int t = 0; t < n; ++t) threads.emplace_back(work);
  for (std::thread& t : threads) t.join();
  return results;
}

}  // namespace anvil
