// RunnerHost's runner that stays up (runner_host.h): one sandboxed runner
// process per host answers the screens of one job and protocol batch after
// batch (RUNNER.md, "A runner that stays up"), so a batch costs no process
// start, CUDA context or vendor library set-up. Its candidates' libraries
// reach it through a read-only directory of its own, bound when it starts
// and filled (hard links, else copies) as batches name them: it sees no other
// build of the node. Also the account of why runner processes end, which
// says how long they stay up.
#include <filesystem>
#include <map>
#include <optional>

#include <google/protobuf/util/json_util.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "sandbox/sandbox.h"
#include "spdlog/spdlog.h"
#include "worker/runner_host.h"

namespace anvil {

struct RunnerHost::Warm {
  Warm(std::string k, sandbox::ScratchDir s, sandbox::ScratchDir l)
      : key(std::move(k)), scratch(std::move(s)), libs(std::move(l)) {}
  std::string key;               // the job, device, seccomp and protocol it serves
  sandbox::ScratchDir scratch;   // its work directory
  sandbox::ScratchDir libs;      // its candidates' libraries, read-only inside
  std::unique_ptr<sandbox::Session> session;
  std::map<std::string, std::string> linked;  // artifact -> its path in libs
  std::optional<v1::RunnerInfo> info;         // from its start-up
  int items = 0;
  int64_t copied_bytes = 0;  // libraries copied, not linked (another file system)
  absl::Time last_used;

  // The path the runner opens `artifact` by. One it cannot be given keeps its
  // own path, which the runner cannot see: that item is not_loadable.
  std::string Link(const std::string& artifact) {
    if (auto it = linked.find(artifact); it != linked.end()) return it->second;
    const std::string to = absl::StrCat(libs.path(), "/", linked.size(), "-",
                                        std::filesystem::path(artifact).filename().string());
    std::error_code ec;
    std::filesystem::create_hard_link(artifact, to, ec);
    if (ec) {
      ec.clear();
      std::filesystem::copy_file(artifact, to, ec);
      if (!ec) {
        std::filesystem::permissions(to, std::filesystem::perms(0644), ec);
        copied_bytes += static_cast<int64_t>(std::filesystem::file_size(to, ec));
      }
    }
    return linked[artifact] = ec ? artifact : to;
  }
};

std::string ProcessEndReason(const sandbox::Result& r) {
  if (r.timed_out) return "timeout";
  if (r.output_capped) return "output flood";
  if (r.cancelled) return "cancelled";
  if (r.term_signal != 0) return absl::StrCat("signal ", r.term_signal);
  if (r.exit_code == 0) return "done";
  if (r.exit_code == 3) return "sticky CUDA error";
  if (r.exit_code != 5) return absl::StrCat("exit ", r.exit_code);
  // "...after candidate ID (LIBRARY): FACT a -> b; FACT ...; the rest of the batch..."
  absl::string_view text = r.stderr_text;
  const size_t from = text.find("): ");
  const size_t to = text.find("; the rest of the batch");
  if (from == absl::string_view::npos || to == absl::string_view::npos || to < from) return "state changed";
  std::vector<std::string> facts;
  for (absl::string_view clause : absl::StrSplit(text.substr(from + 3, to - from - 3), "; ")) {
    facts.emplace_back(absl::StartsWith(clause, "device memory in use") ? "device memory in use"
                                                                          : clause.substr(0, clause.find(' ')));
  }
  return absl::StrCat("state changed: ", absl::StrJoin(facts, ", "));
}

RunnerHost::RunnerHost(RunnerHostOptions options)
    : ceilings_(options.ceilings), options_(std::move(options)) {}

RunnerHost::~RunnerHost() {
  EndWarmRunner();
  absl::MutexLock lock(&mu_);
  if (ends_.empty()) return;
  std::vector<std::string> parts;
  int processes = 0;
  for (const auto& [why, n] : ends_) {
    processes += n;
    parts.push_back(absl::StrCat(why, " ", n));
  }
  spdlog::info("runner processes: {} ended ({}); {} batches taken by a runner that stayed up", processes,
               absl::StrJoin(parts, ", "), reused_batches_);
}

void RunnerHost::NoteEnd(const sandbox::Result& r) {
  const std::string why = ProcessEndReason(r);
  absl::MutexLock lock(&mu_);
  if (ends_[why]++ == 0 && why != "done") {
    const std::string& err = r.stderr_text;
    spdlog::info("a runner process ended ({}): {}", why, err.size() > 400 ? "..." + err.substr(err.size() - 400) : err);
  }
}

void RunnerHost::EndWarmRunner() {
  std::unique_ptr<Warm> ending;
  {
    absl::MutexLock lock(&warm_mu_);
    ending = std::move(warm_);
  }
  if (!ending || !ending->session) return;
  absl::StatusOr<sandbox::Result> ended = ending->session->Finish();  // it ends at the end of input
  if (ended.ok()) NoteEnd(*ended);
}

absl::StatusOr<RunnerHost::Attempt> RunnerHost::RunWarm(v1::RunnerRequest request, const std::string& job,
                                                      const std::function<bool()>& cancelled) {
  std::string settings;
  (void)request.protocol().SerializeToString(&settings);
  const std::string key = absl::StrCat(job, "\n", request.device(), " ", request.seccomp(), "\n", settings);
  bool stale = false;
  {
    absl::MutexLock lock(&warm_mu_);
    stale = warm_ && (warm_->key != key || warm_->items >= kWarmRunnerItems ||
                      warm_->copied_bytes >= kWarmRunnerCopiedBytes ||
                      absl::Now() - warm_->last_used > kWarmRunnerIdle);
  }
  if (stale) EndWarmRunner();
  absl::MutexLock lock(&warm_mu_);
  const bool reused = warm_ != nullptr;
  if (!reused) {
    absl::StatusOr<sandbox::ScratchDir> scratch = sandbox::ScratchDir::Create(options_.scratch_dir, "anvil-run-");
    if (!scratch.ok()) return scratch.status();
    absl::StatusOr<sandbox::ScratchDir> libs = sandbox::ScratchDir::Create(options_.scratch_dir, "anvil-libs-");
    if (!libs.ok()) return libs.status();
    auto w = std::make_unique<Warm>(key, *std::move(scratch), *std::move(libs));
    sandbox::Spec spec = RunnerSpec(w->scratch.path());
    spec.binds.push_back({w->libs.path(), "", false});
    absl::StatusOr<std::unique_ptr<sandbox::Session>> session = sandbox::Session::Start(spec);
    if (!session.ok()) return session.status();
    w->session = *std::move(session);
    w->last_used = absl::Now();
    warm_ = std::move(w);
  }
  Warm& w = *warm_;
  for (v1::RunnerItem& item : *request.mutable_items()) item.set_library(w.Link(item.library()));
  request.set_keep_alive(true);
  std::string json;
  if (!google::protobuf::util::MessageToJsonString(request, &json).ok()) {
    return absl::InternalError("cannot encode the runner request");
  }
  const RunnerLimits& limits = options_.limits;
  const bool profile = request.protocol().profile_counters();
  RunnerWatch watch(limits, profile);
  if (reused) watch.Resume();
  sandbox::Session::Exchange x;
  x.input = json + "\n";
  x.on_stdout = [&watch](absl::string_view chunk) { return watch.OnStdout(chunk); };
  x.answered = [&watch] { return watch.batch_ended(); };
  x.cancelled = cancelled;
  x.wall_time = (reused ? limits.setup_timeout : limits.startup_timeout) +
                FixedProblemLimit(limits, profile) * request.items_size();
  absl::StatusOr<bool> answered = w.session->Send(x);
  Attempt a;
  a.reused = reused;
  a.answered = answered.ok() && *answered;
  std::optional<v1::RunnerInfo> info = w.info;
  if (a.answered) {
    if (reused) {
      absl::MutexLock count(&mu_);
      ++reused_batches_;
    }
    a.result.exit_code = 0;
    w.items += request.items_size();
    w.last_used = absl::Now();
  } else {
    absl::StatusOr<sandbox::Result> ended = w.session->Finish();
    warm_.reset();
    if (!answered.ok()) return answered.status();
    if (!ended.ok()) return ended.status();
    NoteEnd(*ended);
    if (ended->cancelled) return absl::CancelledError("the measurement was cancelled");
    a.result = *std::move(ended);
  }
  watch.Finish();
  Collect(watch, &a);
  if (a.info) info = a.info;
  a.info = info;
  if (warm_) warm_->info = info;
  return a;
}

}  // namespace anvil
