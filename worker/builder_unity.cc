// Builder's unity groups (worker/BUILDS.md): which candidates BuildAll
// compiles together (MakePlan), and building one group (BuildGroup,
// CompileGroup). BuildAll itself, and builds alone, are in builder.cc.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "worker/builder.h"
#include "worker/builder_flags.h"
#include "worker/compile_log.h"
#include "worker/ptxas.h"
#include "worker/unity.h"

namespace anvil {
namespace {

using builder_internal::ArchOf;
using builder_internal::FlagSet;
using builder_internal::MakeFlags;

// Splits `members` into `chunks` contiguous runs of nearly equal size.
std::vector<std::vector<size_t>> Chunk(const std::vector<size_t>& members, size_t chunks) {
  std::vector<std::vector<size_t>> out(chunks);
  for (size_t k = 0; k < members.size(); ++k) out[k * chunks / members.size()].push_back(members[k]);
  return out;
}

// How many groups to cut each group of `sizes` members into: runs of at most
// `most`, and more (smaller) ones while fewer items than `jobs` would leave
// threads idle (a unity compile is one serial process).
std::vector<size_t> ChunkCounts(const std::vector<size_t>& sizes, size_t alone, int most, int jobs) {
  const size_t cap = static_cast<size_t>(std::max(1, most));
  std::vector<size_t> chunks;
  size_t items = alone;
  for (size_t m : sizes) {
    chunks.push_back((m + cap - 1) / cap);
    items += chunks.back();
  }
  auto per = [&](size_t k) { return (sizes[k] + chunks[k] - 1) / chunks[k]; };
  while (items < static_cast<size_t>(std::max(1, jobs))) {
    size_t best = chunks.size();
    for (size_t k = 0; k < chunks.size(); ++k) {
      if (per(k) > 1 && (best == chunks.size() || per(k) > per(best))) best = k;
    }
    if (best == chunks.size()) break;
    ++chunks[best];
    ++items;
  }
  return chunks;
}

// Why a sandboxed nvcc run failed, in one line, with its first error if any.
std::string Failure(const sandbox::Result& run, const std::string& dir) {
  std::string first = TrimCompileLog(run.stdout_text + run.stderr_text, dir, 1, 300);
  while (!first.empty() && first.back() == '\n') first.pop_back();
  return absl::StrCat("nvcc ", run.Describe(), first.empty() ? "" : ": ", first);
}

// A source's analysis when its configurations may be grouped; else null, and
// `why` says why for the logs (empty when the source policy refuses it: Build
// then reports that, as it would alone).
std::shared_ptr<const UnitySource> Analyse(absl::string_view source, std::string* why) {
  absl::StatusOr<std::vector<sandbox::PolicyViolation>> v = sandbox::CheckSource(source, sandbox::SourcePolicy{});
  if (!v.ok() || !v->empty()) return nullptr;
  auto analysis = std::make_shared<const UnitySource>(source);
  if (analysis->ineligible().empty()) return analysis;
  *why = absl::StrCat("not grouped: ", analysis->ineligible());
  return nullptr;
}

}  // namespace

Builder::Plan Builder::MakePlan(const std::vector<v1::Candidate>& candidates) const {
  Plan plan;
  // Per distinct source text: its analysis (or null) and why not.
  std::map<absl::string_view, std::pair<std::shared_ptr<const UnitySource>, std::string>> sources;
  std::map<std::string, size_t> group_of;  // group key -> index in plan.groups
  for (size_t i = 0; i < candidates.size(); ++i) {
    const v1::Candidate& c = candidates[i];
    absl::StatusOr<FlagSet> f = MakeFlags(c, options_.toolchain);
    if (options_.unity <= 1 || !f.ok() || f->ExtraDefines()) {
      plan.alone.emplace_back(i, f.ok() && f->ExtraDefines() ? "not grouped: its own flags define macros" : "");
      continue;
    }
    auto [it, fresh] = sources.try_emplace(c.source());
    if (fresh) it->second.first = Analyse(c.source(), &it->second.second);
    const std::shared_ptr<const UnitySource>& source = it->second.first;
    absl::StatusOr<std::string> prelude =
        source ? source->Prelude(f->defines) : absl::FailedPreconditionError(it->second.second);
    if (!prelude.ok()) {
      const std::string why(prelude.status().message());
      plan.alone.emplace_back(i, source && !why.empty() ? absl::StrCat("not grouped: ", why) : why);
      continue;
    }
    // Same source, arch, layout, own flags and prelude (so the same headers and macros).
    const std::string key = absl::StrCat(reinterpret_cast<uintptr_t>(source.get()), "\n", ArchOf(c), "\n",
                                         c.layout(), "\n", c.flags(), "\n", *prelude);
    auto [g, added] = group_of.try_emplace(key, plan.groups.size());
    if (added) plan.groups.push_back(Group{source, *prelude, f->Object(), {}});
    plan.groups[g->second].members.push_back(i);
  }
  std::vector<size_t> sizes;
  for (const Group& g : plan.groups) sizes.push_back(g.members.size());
  const std::vector<size_t> chunks = ChunkCounts(sizes, plan.alone.size(), options_.unity, options_.jobs);
  std::vector<Group> groups;
  for (size_t k = 0; k < plan.groups.size(); ++k) {
    for (std::vector<size_t>& members : Chunk(plan.groups[k].members, chunks[k])) {
      if (members.size() == 1) {
        plan.alone.emplace_back(members[0], "");
        continue;
      }
      groups.push_back(plan.groups[k]);
      groups.back().members = std::move(members);
    }
  }
  // Largest first, so that the long compiles do not come last.
  std::stable_sort(groups.begin(), groups.end(),
                   [](const Group& a, const Group& b) { return a.members.size() > b.members.size(); });
  plan.groups = std::move(groups);
  std::sort(plan.alone.begin(), plan.alone.end());
  return plan;
}

std::vector<std::pair<size_t, std::string>> Builder::BuildGroup(
    const Group& group, const std::vector<v1::Candidate>& candidates,
    const std::function<bool()>& cancelled, const BuiltFn& built) const {
  std::vector<GroupConfig> configs;
  for (size_t i : group.members) {
    const v1::Candidate& c = candidates[i];
    absl::StatusOr<FlagSet> f = MakeFlags(c, options_.toolchain);  // planned: valid
    GroupConfig config{{i}, f->All(), f->defines, ""};
    config.key = BuildCache::Key(options_.toolchain.nvcc_version, ArchOf(c),
                                 absl::StrJoin(config.flags, " "), c.source());
    if (std::optional<v1::Build> hit = cache_.Lookup(config.key)) {
      hit->set_candidate_id(c.id());
      built(i, *std::move(hit));
      continue;
    }
    auto same = std::find_if(configs.begin(), configs.end(),
                             [&](const GroupConfig& g) { return g.key == config.key; });
    if (same != configs.end()) same->members.push_back(i);
    else configs.push_back(std::move(config));
  }
  std::vector<std::pair<size_t, std::string>> alone;
  if (configs.size() == 1) {  // one key left (the others were cache hits): built alone
    for (size_t i : configs[0].members) alone.emplace_back(i, "");
    return alone;
  }
  if (configs.empty()) return alone;
  absl::StatusOr<GroupResult> r = absl::CancelledError("build cancelled");
  if (!cancelled || !cancelled()) r = CompileGroup(group, candidates[group.members[0]], configs, cancelled);
  for (size_t k = 0; k < configs.size(); ++k) {
    for (size_t i : configs[k].members) {
      if (absl::IsCancelled(r.status())) {
        built(i, absl::CancelledError(absl::StrCat("build of ", candidates[i].id(), " cancelled")));
      } else if (!r.ok() || !r->builds[k].has_value()) {
        alone.emplace_back(i, absl::StrCat("its unity group of ", configs.size(), " could not build it: ",
                                           r.ok() ? r->why[k] : r.status().ToString()));
      } else {
        absl::StatusOr<v1::Build> b = *r->builds[k];
        if (b.ok()) b->set_candidate_id(candidates[i].id());
        built(i, std::move(b));
      }
    }
  }
  return alone;
}

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
  const std::vector<std::vector<v1::KernelUsage>> usage =
      SplitUsage(ParsePtxasReport(run->stdout_text + run->stderr_text), n);
  for (size_t k = 0; k < n; ++k) {
    absl::Status linked = LinkMember(dir, k, configs, first, run->wall_seconds, usage[k], cancelled, &result);
    if (!linked.ok()) return linked;
  }
  return result;
}

absl::Status Builder::LinkMember(const std::string& dir, size_t k, const std::vector<GroupConfig>& configs,
                                 const v1::Candidate& first, double compile_s,
                                 const std::vector<v1::KernelUsage>& usage,
                                 const std::function<bool()>& cancelled, GroupResult* result) const {
  const GroupConfig& c = configs[k];
  const size_t n = configs.size();
  const std::string so = absl::StrCat("candidate_", k, ".so");
  sandbox::Spec link = NvccSpec(dir, cancelled);
  link.argv.insert(link.argv.end(), c.flags.begin(), c.flags.end());
  for (const std::string& a : {std::string("-o"), so, std::string("unity.o")}) link.argv.push_back(a);
  for (const std::string& a : UnityLinkAliases(k)) link.argv.push_back(a);
  absl::StatusOr<sandbox::Result> linked = sandbox::Run(link);
  if (!linked.ok()) return linked.status();
  if (linked->cancelled) return absl::CancelledError("build cancelled");
  if (linked->timed_out || linked->exit_code != 0 || !std::filesystem::exists(dir + "/" + so)) {
    result->why[k] = absl::StrCat("its link from the group's object failed (", Failure(*linked, dir), ")");
    return absl::OkStatus();
  }
  v1::Build build;
  build.set_candidate_id(first.id());  // BuildGroup names each member
  build.set_flags(absl::StrJoin(c.flags, " "));
  build.set_nvcc_version(options_.toolchain.nvcc_version);
  build.set_arch(ArchOf(first));
  build.set_seconds(compile_s / static_cast<double>(n) + linked->wall_seconds);
  for (const v1::KernelUsage& u : usage) *build.add_usage() = u;
  build.set_verdict(v1::VERDICT_PASSED);
  std::string log = absl::StrCat(
      "compiled in a unity group of ", n, " configurations: one nvcc -c of a translation unit holding each in ",
      "a namespace of its own (this one ", UnityNamespace(k), ", its anvil_* functions renamed), ",
      absl::SixDigits(compile_s), " s, then this shared object linked alone from that object, ",
      absl::SixDigits(linked->wall_seconds), " s.\nIt also holds the group's other configurations, as code it ",
      "never calls; their cache keys:\n");
  for (size_t j = 0; j < n; ++j) {
    if (j != k) absl::StrAppend(&log, "  ", configs[j].key, "\n");
  }
  result->builds[k] = cache_.Publish(c.key, dir + "/" + so, build, log);
  return absl::OkStatus();
}

}  // namespace anvil
