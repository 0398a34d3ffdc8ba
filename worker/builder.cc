#include "worker/builder.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <regex>
#include <thread>

#include "absl/strings/match.h"
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

// A candidate's nvcc flags in the parts a unity build takes apart. All() is
// the list Build uses (and the cache key hashes): head, -shared, tail, the
// layout and param macros as -D flags, the candidate's own flags.
struct FlagSet {
  std::vector<std::string> head, tail;
  MacroDefines defines;
  std::vector<std::string> extra;

  std::vector<std::string> All() const {
    std::vector<std::string> f = head;
    f.push_back("-shared");
    f.insert(f.end(), tail.begin(), tail.end());
    for (const auto& [name, value] : defines) f.push_back(absl::StrCat("-D", name, "=", value));
    f.insert(f.end(), extra.begin(), extra.end());
    return f;
  }
  // For nvcc -c of a unity translation unit, which #defines the macros itself.
  std::vector<std::string> Object() const {
    std::vector<std::string> f = head;
    f.insert(f.end(), tail.begin(), tail.end());
    f.insert(f.end(), extra.begin(), extra.end());
    return f;
  }
  bool ExtraDefines() const {
    return std::any_of(extra.begin(), extra.end(), [](const std::string& x) { return absl::StartsWith(x, "-D"); });
  }
};

absl::StatusOr<FlagSet> MakeFlags(const v1::Candidate& c, const Toolchain& toolchain) {
  const std::string arch = c.arch().empty() ? "sm_90a" : c.arch();
  if (arch != "sm_90a" && arch != "sm_90") {
    return absl::InvalidArgumentError(absl::StrCat("arch '", arch, "' must be sm_90a or sm_90"));
  }
  const std::string compute = arch == "sm_90a" ? "compute_90a" : "compute_90";
  FlagSet f;
  f.head = {"-std=c++17", "-O3"};
  f.tail = {"-Xcompiler", "-fPIC", "--cudart", "shared", "-lineinfo",
            "-Xptxas", "-v", absl::StrCat("-gencode=arch=", compute, ",code=", arch)};
  if (!toolchain.cutlass_dir.empty()) {
    f.tail.push_back("-I" + toolchain.cutlass_dir + "/include");
    f.tail.push_back("-I" + toolchain.cutlass_dir + "/tools/util/include");
  }
  if (c.layout() != v1::LAYOUT_NT && c.layout() != v1::LAYOUT_NN) {
    return absl::InvalidArgumentError("candidate layout must be nt or nn");
  }
  f.defines.emplace_back(c.layout() == v1::LAYOUT_NT ? "ANVIL_LAYOUT_NT" : "ANVIL_LAYOUT_NN", "1");
  std::map<std::string, std::string> params(c.params().begin(), c.params().end());
  for (const auto& [k, v] : params) {
    if (!AllowedParam(k, v)) {
      return absl::InvalidArgumentError(absl::StrCat("parameter ", k, "=", v, " is not allowed"));
    }
    f.defines.emplace_back("ANVIL_" + k, v);
  }
  for (absl::string_view x : absl::StrSplit(c.flags(), ' ', absl::SkipEmpty())) {
    if (!AllowedFlag(std::string(x))) {
      return absl::InvalidArgumentError(absl::StrCat("nvcc flag '", x, "' is not allowed"));
    }
    f.extra.emplace_back(x);
  }
  return f;
}

std::string ArchOf(const v1::Candidate& c) { return c.arch().empty() ? "sm_90a" : c.arch(); }

// Splits `n` members into `chunks` contiguous runs of nearly equal size.
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

}  // namespace

int DefaultBuildJobs() { return std::max(1, static_cast<int>(std::thread::hardware_concurrency() / 2)); }

Builder::Builder(BuilderOptions options)
    : options_(std::move(options)), cache_(options_.cache_dir) {
  std::error_code ec;
  std::filesystem::create_directories(options_.cache_dir, ec);
}

absl::StatusOr<std::vector<std::string>> Builder::Flags(const v1::Candidate& c) const {
  absl::StatusOr<FlagSet> f = MakeFlags(c, options_.toolchain);
  if (!f.ok()) return f.status();
  return f->All();
}

absl::StatusOr<v1::Build> Builder::Build(const v1::Candidate& c,
                                         const std::function<bool()>& cancelled) const {
  return BuildAlone(c, cancelled, "");
}

absl::StatusOr<v1::Build> Builder::BuildAlone(const v1::Candidate& c,
                                              const std::function<bool()>& cancelled,
                                              const std::string& note) const {
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
  const std::string key = BuildCache::Key(options_.toolchain.nvcc_version, ArchOf(c), flag_text,
                                          c.source());
  if (std::optional<v1::Build> hit = cache_.Lookup(key)) {
    hit->set_candidate_id(c.id());
    return *hit;
  }
  if (cancelled && cancelled()) return absl::CancelledError(absl::StrCat("build of ", c.id(), " cancelled"));
  return Compile(c, *flags, key, cancelled, note);
}

sandbox::Spec Builder::NvccSpec(const std::string& dir, const std::function<bool()>& cancelled) const {
  sandbox::Spec spec;
  spec.argv = {options_.toolchain.nvcc};
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
  return spec;
}

absl::StatusOr<v1::Build> Builder::Compile(const v1::Candidate& c,
                                           const std::vector<std::string>& flags,
                                           const std::string& key,
                                           const std::function<bool()>& cancelled,
                                           const std::string& note) const {
  absl::StatusOr<sandbox::ScratchDir> scratch =
      sandbox::ScratchDir::Create(options_.scratch_dir, "anvil-build-");
  if (!scratch.ok()) return scratch.status();
  const std::string dir = scratch->path();
  {
    std::ofstream src(dir + "/candidate.cu");
    src << c.source();
    if (!src) return absl::ResourceExhaustedError("cannot write the candidate source (disk full?)");
  }
  sandbox::Spec spec = NvccSpec(dir, cancelled);
  spec.argv.insert(spec.argv.end(), flags.begin(), flags.end());
  for (const char* a : {"-o", "candidate.so", "candidate.cu"}) spec.argv.emplace_back(a);
  absl::StatusOr<sandbox::Result> run = sandbox::Run(spec);
  if (!run.ok()) return run.status();
  if (run->cancelled) return absl::CancelledError(absl::StrCat("build of ", c.id(), " cancelled"));

  v1::Build build;
  build.set_candidate_id(c.id());
  build.set_flags(absl::StrJoin(flags, " "));
  build.set_nvcc_version(options_.toolchain.nvcc_version);
  build.set_arch(ArchOf(c));
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
  return cache_.Publish(key, dir + "/candidate.so", build,
                        absl::StrCat("compiled alone: one nvcc run, ", absl::SixDigits(run->wall_seconds),
                                     " s\n", note, note.empty() ? "" : "\n"));
}

Builder::Plan Builder::MakePlan(const std::vector<v1::Candidate>& candidates) const {
  Plan plan;
  // Per distinct source text: its analysis, or null when it cannot be grouped
  // (it fails the source policy, which Build then reports, or UnitySource says no).
  std::map<absl::string_view, std::shared_ptr<const UnitySource>> sources;
  std::map<absl::string_view, std::string> ineligible;
  std::map<std::string, size_t> group_of;  // group key -> index in plan.groups
  for (size_t i = 0; i < candidates.size(); ++i) {
    const v1::Candidate& c = candidates[i];
    absl::StatusOr<FlagSet> f = MakeFlags(c, options_.toolchain);
    if (options_.unity <= 1 || !f.ok() || f->ExtraDefines()) {
      plan.alone.emplace_back(i, f.ok() && f->ExtraDefines() ? "not grouped: its own flags define macros" : "");
      continue;
    }
    auto [it, fresh] = sources.try_emplace(c.source(), nullptr);
    if (fresh) {
      absl::StatusOr<std::vector<sandbox::PolicyViolation>> v =
          sandbox::CheckSource(c.source(), sandbox::SourcePolicy{});
      auto analysis = std::make_shared<const UnitySource>(c.source());
      if (!v.ok() || !v->empty()) {
        // Build refuses it, as it would alone.
      } else if (!analysis->ineligible().empty()) {
        ineligible[c.source()] = analysis->ineligible();  // for the log of each of its builds
      } else {
        it->second = std::move(analysis);
      }
    }
    if (!it->second) {
      auto why = ineligible.find(c.source());
      plan.alone.emplace_back(i, why == ineligible.end() ? "" : absl::StrCat("not grouped: ", why->second));
      continue;
    }
    absl::StatusOr<std::string> prelude = it->second->Prelude(f->defines);
    if (!prelude.ok()) {
      plan.alone.emplace_back(i, absl::StrCat("not grouped: ", prelude.status().message()));
      continue;
    }
    const std::string key =
        absl::StrCat(reinterpret_cast<uintptr_t>(it->second.get()), "\n", ArchOf(c), "\n", c.layout(),
                     "\n", c.flags(), "\n", *prelude);
    auto [g, added] = group_of.try_emplace(key, plan.groups.size());
    if (added) plan.groups.push_back(Group{it->second, *prelude, f->Object(), {}});
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
  if (configs.size() == 1) {  // the others were cache hits
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

std::vector<absl::StatusOr<v1::Build>> Builder::BuildAll(
    const std::vector<v1::Candidate>& candidates, const std::function<bool()>& cancelled,
    const std::function<void(size_t, const absl::StatusOr<v1::Build>&)>& built) const {
  std::vector<absl::StatusOr<v1::Build>> results(candidates.size(),
                                                 absl::UnknownError("not built"));
  const BuiltFn finish = [&](size_t i, absl::StatusOr<v1::Build> b) {
    results[i] = std::move(b);
    if (built) built(i, results[i]);
  };
  // Work items: a group (index into plan.groups) or one candidate built alone.
  struct Item {
    const Group* group = nullptr;
    size_t alone = 0;
    std::string note;
  };
  const Plan plan = MakePlan(candidates);
  std::deque<Item> queue;
  for (const Group& g : plan.groups) queue.push_back({&g, 0, ""});
  for (const auto& [i, note] : plan.alone) queue.push_back({nullptr, i, note});
  std::mutex mu;
  std::condition_variable changed;
  int busy = 0;  // items being built: a group may still hand back candidates to build alone
  auto work = [&] {
    std::unique_lock<std::mutex> lock(mu);
    while (true) {
      changed.wait(lock, [&] { return !queue.empty() || busy == 0; });
      if (queue.empty()) return;
      Item item = std::move(queue.front());
      queue.pop_front();
      ++busy;
      lock.unlock();
      std::vector<std::pair<size_t, std::string>> more;
      if (item.group != nullptr) {
        more = BuildGroup(*item.group, candidates, cancelled, finish);
      } else {
        finish(item.alone, BuildAlone(candidates[item.alone], cancelled, item.note));
      }
      lock.lock();
      for (auto& [i, note] : more) queue.push_front({nullptr, i, std::move(note)});
      --busy;
      changed.notify_all();
    }
  };
  std::vector<std::thread> threads;
  int n = std::max(1, std::min<int>(options_.jobs, static_cast<int>(candidates.size())));
  for (int t = 0; t < n; ++t) threads.emplace_back(work);
  for (std::thread& t : threads) t.join();
  return results;
}

}  // namespace anvil
