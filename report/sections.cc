// The report's scope, ceilings, failures and rewards.
#include "report/sections.h"

#include <algorithm>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "proto/problem.h"

namespace anvil::report {
namespace {

using nlohmann::json;

std::string VerdictName(v1::Verdict v) {
  std::string name = v1::Verdict_Name(v);
  absl::string_view s = name;
  absl::ConsumePrefix(&s, "VERDICT_");
  return absl::AsciiStrToLower(s);
}

std::string JobStateName(v1::JobState s) {
  std::string name = v1::JobState_Name(s);
  absl::string_view v = name;
  absl::ConsumePrefix(&v, "JOB_STATE_");
  return absl::AsciiStrToLower(v);
}

json JobJson(const v1::Job& job, const v1::OptimizeKernelRequest& request) {
  return {{"id", job.id()},
          {"state", JobStateName(job.state())},
          {"created_unix_ms", job.created_unix_ms()},
          {"updated_unix_ms", job.updated_unix_ms()},
          {"proposer", request.proposer().empty() ? "embedded" : request.proposer()},
          {"reward_figure", request.reward_figure()},
          {"problems", request.problems_size()},
          {"error", job.error()}};
}

absl::Status LoadJobScope(Store& store, const std::string& job_id, const std::string& gpu,
                          Scope& scope) {
  absl::StatusOr<v1::Job> job = store.GetJob(job_id);
  if (!job.ok()) return job.status();
  absl::StatusOr<v1::OptimizeKernelRequest> request = store.GetJobRequest(job_id);
  if (!request.ok()) return request.status();
  // Problems with measurements in the job (a running job has no progress rows yet).
  absl::StatusOr<JobActivity> activity = store.GetJobActivity(job_id, "device");
  if (!activity.ok()) return activity.status();
  for (const ProblemActivity& a : activity->problems) {
    if (!gpu.empty() && a.problem.gpu() != gpu) continue;
    absl::StatusOr<std::vector<StoredMeasurement>> h = store.SearchHistory(a.problem, job_id);
    if (!h.ok()) return h.status();
    if (!h->empty()) scope.problems.push_back({a.problem, *std::move(h)});
  }
  scope.job_ids = {job_id};
  scope.job_figure = request->reward_figure();
  scope.t0_ms = job->created_unix_ms();
  const bool live = job->state() == v1::JOB_STATE_RUNNING || job->state() == v1::JOB_STATE_QUEUED;
  scope.build_windows = {{job->created_unix_ms(), live ? 0 : job->updated_unix_ms()}};
  scope.json = {{"kind", "job"}, {"job", JobJson(*job, *request)}};
  return absl::OkStatus();
}

absl::Status LoadStoreScope(Store& store, const std::string& gpu, Scope& scope) {
  absl::StatusOr<std::vector<v1::Problem>> problems = store.ListProblems(gpu);
  if (!problems.ok()) return problems.status();
  std::set<std::string> jobs;
  for (const v1::Problem& p : *problems) {
    absl::StatusOr<std::vector<StoredMeasurement>> h = store.SearchHistory(p);
    if (!h.ok()) return h.status();
    for (const StoredMeasurement& m : *h) {
      if (!m.job_id.empty()) jobs.insert(m.job_id);
    }
    if (!h->empty()) scope.problems.push_back({p, *std::move(h)});
  }
  scope.job_ids.assign(jobs.begin(), jobs.end());
  scope.all_builds = gpu.empty();
  for (const std::string& id : scope.job_ids) {
    absl::StatusOr<v1::Job> job = store.GetJob(id);
    if (job.ok()) scope.build_windows.push_back({job->created_unix_ms(), job->updated_unix_ms()});
  }
  scope.json = {{"kind", gpu.empty() ? "store" : "gpu"}, {"jobs", scope.job_ids}};
  return absl::OkStatus();
}

// "error: identifier "x" is undefined" -> "identifier is undefined"-like short text.
std::string CompileReason(const std::string& error) {
  if (error.empty()) return "(no log)";
  size_t at = error.find("error:");
  absl::string_view s = error;
  if (at != std::string::npos) s = s.substr(at + 6);
  s = s.substr(0, s.find('\n'));
  std::string out;
  bool quoted = false;  // names inside quotes vary; the message around them does not
  for (char c : absl::StripAsciiWhitespace(s)) {
    if (c == '"' || c == '\'') {
      if (!quoted) out += "\"…\"";
      quoted = !quoted;
    } else if (!quoted) {
      out += c;
    }
  }
  return out.size() > 80 ? out.substr(0, 80) + "…" : out;
}

struct Tally {
  int64_t count = 0;
  double seconds = 0;
  std::string example;
};

}  // namespace

const v1::Candidate& CandidateCache::Get(const std::string& id) {
  auto it = cache_.find(id);
  if (it != cache_.end()) return it->second;
  absl::StatusOr<v1::Candidate> c = store_.GetCandidate(id);
  v1::Candidate& slot = cache_[id];
  if (c.ok()) {
    slot = *std::move(c);
    slot.clear_source();  // the report shows names and knobs, never sources
  }
  return slot;
}

absl::StatusOr<Scope> LoadScope(Store& store, const ReportOptions& options) {
  Scope scope;
  absl::Status st = options.job_id.empty() ? LoadStoreScope(store, options.gpu, scope)
                                           : LoadJobScope(store, options.job_id, options.gpu, scope);
  if (!st.ok()) return st;
  std::set<std::string> gpus;
  for (const ScopedProblem& p : scope.problems) gpus.insert(p.problem.gpu());
  scope.json["gpu"] = options.gpu;
  scope.json["gpus"] = std::vector<std::string>(gpus.begin(), gpus.end());
  scope.json["store"] = store.path();
  return scope;
}

double ProblemFlops(const v1::Problem& p) {
  return 2.0 * double(p.shape().m()) * double(p.shape().n()) * double(p.shape().k());
}

double ProblemBytes(const v1::Problem& p) {
  const double m = p.shape().m(), n = p.shape().n(), k = p.shape().k();
  return 2.0 * (m * k + n * k + m * n);
}

json Ceilings(const std::vector<ScopedProblem>& problems) {
  struct Peak {
    double flops = 0, bytes = 0;
    std::vector<std::pair<double, double>> points;  // (flops, bytes) over sol seconds
  };
  std::map<std::string, Peak> peaks;
  for (const ScopedProblem& p : problems) {
    for (const StoredMeasurement& s : p.history) {
      if (s.measurement.sol_us() <= 0) continue;
      const double sec = s.measurement.sol_us() * 1e-6;
      Peak& k = peaks[p.problem.gpu()];
      const double f = ProblemFlops(p.problem) / sec, b = ProblemBytes(p.problem) / sec;
      k.flops = std::max(k.flops, f);
      k.bytes = std::max(k.bytes, b);
      k.points.push_back({f, b});
    }
  }
  json out = json::object();
  for (const auto& [gpu, k] : peaks) {
    // A ceiling is exact where some problem's speed of light was bound by it;
    // otherwise the stored times only bound it from below.
    bool flops_exact = false, bytes_exact = false;
    for (const auto& [f, b] : k.points) {
      flops_exact = flops_exact || f >= k.flops * 0.999;
      bytes_exact = bytes_exact || b >= k.bytes * 0.999;
    }
    out[gpu] = {{"flops_per_s", k.flops}, {"bytes_per_s", k.bytes},
                {"flops_exact", flops_exact}, {"bytes_exact", bytes_exact}};
  }
  return out;
}

absl::StatusOr<json> Failures(Store& store, const Scope& scope) {
  std::map<std::string, Tally> verdicts;
  std::map<std::pair<std::string, std::string>, Tally> reasons;
  auto add = [&](const std::string& verdict, const std::string& reason, double seconds,
                 const std::string& example) {
    Tally& v = verdicts[verdict];
    ++v.count;
    v.seconds += seconds;
    if (verdict == "passed") return;
    Tally& r = reasons[{verdict, reason}];
    ++r.count;
    r.seconds += seconds;
    if (r.example.empty()) r.example = example.substr(0, 300);
  };
  for (const ScopedProblem& p : scope.problems) {
    for (const StoredMeasurement& s : p.history) {
      const v1::Measurement& m = s.measurement;
      add(VerdictName(m.verdict()), m.reason().empty() ? "(none)" : m.reason(), m.seconds(), m.detail());
    }
  }
  std::vector<std::pair<int64_t, int64_t>> windows = scope.build_windows;
  if (scope.all_builds) windows = {{0, 0}};
  std::set<int64_t> seen;
  for (const auto& [since, until] : windows) {
    absl::StatusOr<std::vector<StoredBuild>> builds = store.ListBuilds(since, until);
    if (!builds.ok()) return builds.status();
    for (const StoredBuild& b : *builds) {
      if (!seen.insert(b.id).second) continue;
      const std::string verdict = VerdictName(b.build.verdict());
      add(verdict == "passed" ? "passed" : verdict, CompileReason(b.build.error()), b.build.seconds(),
          b.build.error());
    }
  }
  double total = 0;
  for (const auto& [v, t] : verdicts) total += t.seconds;
  json out = {{"total_s", total}, {"verdicts", json::array()}, {"reasons", json::array()}};
  for (const auto& [v, t] : verdicts) {
    out["verdicts"].push_back({{"verdict", v}, {"count", t.count}, {"seconds", t.seconds},
                               {"share", total > 0 ? t.seconds / total : 0.0}});
  }
  std::vector<std::pair<std::pair<std::string, std::string>, Tally>> sorted(reasons.begin(), reasons.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
  for (const auto& [key, t] : sorted) {
    out["reasons"].push_back({{"verdict", key.first}, {"reason", key.second}, {"count", t.count},
                              {"seconds", t.seconds}, {"example", t.example}});
  }
  return out;
}

absl::StatusOr<json> Rewards(Store& store, const Scope& scope, CandidateCache& candidates) {
  json out = json::array();
  for (const std::string& job : scope.job_ids) {
    absl::StatusOr<std::vector<Reward>> rewards = store.ListRewards(job);
    if (!rewards.ok()) return rewards.status();
    for (const Reward& r : *rewards) {
      json details = json::parse(r.details_json, nullptr, /*allow_exceptions=*/false);
      if (!details.is_object()) details = json::object();
      std::string recipe = "(none)";
      for (const char* key : {"recipe", "context_recipe", "context"}) {
        if (details.contains(key)) {
          recipe = details[key].is_string() ? details[key].get<std::string>() : details[key].dump();
          break;
        }
      }
      std::string proposer = details.contains("proposer") && details["proposer"].is_string()
                                 ? details["proposer"].get<std::string>()
                                 : candidates.Get(r.candidate_id).proposer();
      out.push_back({{"unix_ms", r.created_unix_ms}, {"job", job},
                     {"proposer", proposer.empty() ? "unknown" : proposer}, {"recipe", recipe},
                     {"kind", r.kind}, {"value", r.value},
                     {"problem", r.problem ? ProblemName(*r.problem) : ""}});
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const json& a, const json& b) {
    return a["unix_ms"].get<int64_t>() < b["unix_ms"].get<int64_t>();
  });
  return out;
}

}  // namespace anvil::report
