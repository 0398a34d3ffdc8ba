// Builder::CompileGroup: the unity build of one group (worker/BUILDS.md).
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "worker/builder.h"
#include "worker/compile_log.h"
#include "worker/ptxas.h"
#include "worker/unity.h"

namespace anvil {
namespace {

// Why a sandboxed nvcc run failed, in one line, with its first error if any.
std::string Failure(const sandbox::Result& run, const std::string& dir) {
  std::string first = TrimCompileLog(run.stdout_text + run.stderr_text, dir, 1, 300);
  while (!first.empty() && first.back() == '\n') first.pop_back();
  return absl::StrCat("nvcc ", run.Describe(), first.empty() ? "" : ": ", first);
}

}  // namespace

absl::StatusOr<Builder::GroupResult> Builder::CompileGroup(
    const Group& group, const v1::Candidate& first, const std::vector<GroupConfig>& configs,
    const std::function<bool()>& cancelled) const {
  const size_t n = configs.size();
  absl::StatusOr<sandbox::ScratchDir> scratch =
      sandbox::ScratchDir::Create(options_.scratch_dir, "anvil-unity-");
  if (!scratch.ok()) return scratch.status();
  const std::string dir = scratch->path();
  {
    std::vector<MacroDefines> defines;
    for (const GroupConfig& c : configs) defines.push_back(c.defines);
    std::ofstream tu(dir + "/unity.cu");
    tu << UnityTranslationUnit(*group.source, first.source(), group.prelude, defines);
    if (!tu) return absl::ResourceExhaustedError("cannot write the unity source (disk full?)");
  }
  // One compile for all: the time and output limits of n compiles.
  sandbox::Spec spec = NvccSpec(dir, cancelled);
  spec.argv.insert(spec.argv.end(), group.object_flags.begin(), group.object_flags.end());
  for (const char* a : {"-c", "-o", "unity.o", "unity.cu"}) spec.argv.emplace_back(a);
  spec.limits.wall_time = options_.timeout * static_cast<double>(n);
  spec.limits.output_cap_bytes *= static_cast<int64_t>(n);
  absl::StatusOr<sandbox::Result> run = sandbox::Run(spec);
  if (!run.ok()) return run.status();
  if (run->cancelled) return absl::CancelledError("build cancelled");
  GroupResult result;
  result.builds.resize(n);
  result.why.resize(n);
  if (run->timed_out || run->exit_code != 0 || run->stdout_truncated || run->stderr_truncated ||
      !std::filesystem::exists(dir + "/unity.o")) {
    const std::string why = absl::StrCat("its unity compile failed (", Failure(*run, dir), ")");
    for (std::string& w : result.why) w = why;
    return result;
  }
  const double compile_s = run->wall_seconds;
  const std::vector<std::vector<v1::KernelUsage>> usage =
      SplitUsage(ParsePtxasReport(run->stdout_text + run->stderr_text), n);
  for (size_t k = 0; k < n; ++k) {
    const GroupConfig& c = configs[k];
    const std::string so = absl::StrCat("candidate_", k, ".so");
    sandbox::Spec link = NvccSpec(dir, cancelled);
    link.argv.insert(link.argv.end(), c.flags.begin(), c.flags.end());
    for (const std::string& a : {std::string("-o"), so, std::string("unity.o")}) link.argv.push_back(a);
    for (const std::string& a : UnityLinkAliases(k)) link.argv.push_back(a);
    absl::StatusOr<sandbox::Result> linked = sandbox::Run(link);
    if (!linked.ok()) return linked.status();
    if (linked->cancelled) return absl::CancelledError("build cancelled");
    if (linked->timed_out || linked->exit_code != 0 || !std::filesystem::exists(dir + "/" + so)) {
      result.why[k] = absl::StrCat("its link from the group's object failed (", Failure(*linked, dir), ")");
      continue;
    }
    v1::Build build;
    build.set_candidate_id(first.id());  // BuildGroup names each member
    build.set_flags(absl::StrJoin(c.flags, " "));
    build.set_nvcc_version(options_.toolchain.nvcc_version);
    build.set_arch(first.arch().empty() ? "sm_90a" : first.arch());
    build.set_seconds(compile_s / static_cast<double>(n) + linked->wall_seconds);
    for (const v1::KernelUsage& u : usage[k]) *build.add_usage() = u;
    build.set_verdict(v1::VERDICT_PASSED);
    const std::string log = absl::StrCat(
        "compiled in a unity group of ", n, " configurations: one nvcc -c of a translation unit holding each in ",
        "a namespace of its own (this one ", UnityNamespace(k), ", its anvil_* functions renamed), ",
        absl::SixDigits(compile_s), " s, then this shared object linked alone from that object, ",
        absl::SixDigits(linked->wall_seconds), " s.\nIt also holds the group's other configurations, as code it ",
        "never calls; their cache keys:\n");
    std::string others;
    for (size_t j = 0; j < n; ++j) {
      if (j != k) absl::StrAppend(&others, "  ", configs[j].key, "\n");
    }
    result.builds[k] = cache_.Publish(c.key, dir + "/" + so, build, log + others);
  }
  return result;
}

}  // namespace anvil
