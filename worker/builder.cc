#include "worker/builder.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "sandbox/sandbox.h"
#include "worker/builder_flags.h"
#include "worker/compile_log.h"
#include "worker/ptxas.h"

namespace anvil {
namespace {

using builder_internal::ArchOf;
using builder_internal::FlagSet;
using builder_internal::MakeFlags;

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

// Every core but two (the runner and the coordinator keep theirs): on a
// 16-core H100 node 14 jobs build 140 candidates a minute against 86 with 8
// (bench/results/2026-11-27-search-throughput-h200.md, "Builds").
int DefaultBuildJobs() { return std::max(1, static_cast<int>(std::thread::hardware_concurrency()) - 2); }

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
