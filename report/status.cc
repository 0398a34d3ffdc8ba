// The status page's model and its HTTP answers.
#include "report/status.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "proto/figures.h"
#include "proto/problem.h"
#include "report/embedded.h"
#include "report/report.h"

namespace anvil::report {
namespace {

using nlohmann::json;

std::string Lower(const std::string& enum_name, absl::string_view prefix) {
  absl::string_view s = enum_name;
  absl::ConsumePrefix(&s, prefix);
  return absl::AsciiStrToLower(s);
}

json ProblemsJson(const v1::Job& job, const JobActivity& activity) {
  json out = json::array();
  for (const ProblemActivity& a : activity.problems) {
    out.push_back({{"name", ProblemName(a.problem)}, {"candidates", a.candidates},
                   {"measurements", a.measurements}, {"failed", a.failed},
                   {"best_speedup", a.best_speedup}});
  }
  // Problems of the request not measured yet.
  for (const v1::ProblemProgress& p : job.problems()) {
    bool seen = false;
    for (const ProblemActivity& a : activity.problems) seen = seen || ProblemName(a.problem) == ProblemName(p.problem());
    if (!seen) out.push_back({{"name", ProblemName(p.problem())}, {"candidates", p.candidates_tried()},
                              {"measurements", 0}, {"failed", 0}, {"best_speedup", p.speedup()}});
  }
  return out;
}

absl::StatusOr<json> JobJson(Store& store, const v1::Job& job, int64_t now) {
  absl::StatusOr<v1::OptimizeKernelRequest> request = store.GetJobRequest(job.id());
  v1::OptimizeKernelRequest req = request.ok() ? *request : v1::OptimizeKernelRequest();
  const std::string figure = req.reward_figure().empty() ? "device" : req.reward_figure();
  absl::StatusOr<JobActivity> activity = store.GetJobActivity(job.id(), figure);
  if (!activity.ok() && activity.status().code() != absl::StatusCode::kNotFound) return activity.status();
  JobActivity a = activity.ok() ? *activity : JobActivity();
  const std::string state = Lower(v1::JobState_Name(job.state()), "JOB_STATE_");
  const bool live = state == "running" || state == "queued";
  const double elapsed = ((live ? now : job.updated_unix_ms()) - job.created_unix_ms()) / 1000.0;
  const double budget = req.budget().max_wall_seconds();
  return json{{"id", job.id()}, {"state", state}, {"error", job.error()},
              {"proposer", req.proposer().empty() ? "embedded" : req.proposer()},
              {"figure", figure}, {"created_unix_ms", job.created_unix_ms()},
              {"updated_unix_ms", job.updated_unix_ms()}, {"elapsed_s", std::max(0.0, elapsed)},
              {"budget_s", budget},
              {"progress", budget > 0 ? std::min(1.0, elapsed / budget) : (live ? -1.0 : 1.0)},
              {"measurements", a.measurements}, {"builds", a.builds},
              {"failed_builds", a.failed_builds}, {"problems", ProblemsJson(job, a)}};
}

// The fleet's leases as the store holds them (a GPU slot's measure task or a build slot's build).
absl::StatusOr<std::vector<LeaseInfo>> StoredLeases(Store& store) {
  absl::StatusOr<std::vector<TaskRecord>> tasks = store.ListTasks("leased");
  if (!tasks.ok()) return tasks.status();
  std::vector<LeaseInfo> leases;
  for (const TaskRecord& t : *tasks) {
    leases.push_back({t.lease_owner, t.lease_slot, t.job_id, t.candidate_id, t.updated_unix_ms,
                      t.lease_expires_unix_ms});
  }
  return leases;
}

json WorkersJson(const StatusSnapshot& snap, const std::vector<WorkerRecord>& workers, int64_t now) {
  json out = json::array();
  for (const WorkerRecord& w : workers) {
    int builds = 0;  // build-slot leases
    for (const LeaseInfo& l : snap.leases) builds += l.worker_id == w.id && l.gpu_ordinal < 0;
    json gpus = json::array();
    for (const v1::GpuInfo& g : w.gpus) {
      json lease = nullptr;
      for (const LeaseInfo& l : snap.leases) {
        if (l.worker_id == w.id && l.gpu_ordinal == g.ordinal()) {
          lease = {{"job", l.job_id}, {"candidate", l.candidate}, {"since_unix_ms", l.since_unix_ms},
                   {"deadline_unix_ms", l.deadline_unix_ms}};
        }
      }
      gpus.push_back({{"ordinal", g.ordinal()}, {"model", g.model()}, {"uuid", g.uuid()},
                      {"memory_bytes", g.memory_bytes()}, {"lease", lease}});
    }
    const double silent = (now - w.last_heartbeat_unix_ms) / 1000.0;
    out.push_back({{"id", w.id}, {"hostname", w.hostname}, {"state", w.state},
                   {"versions", w.versions}, {"heartbeat_age_s", silent},
                   {"healthy", w.state == "alive" && w.quarantine_reason.empty() &&
                                   silent <= snap.heartbeat_timeout_s},
                   {"quarantine", w.quarantine_reason}, {"build_leases", builds},
                   {"build_slots", w.build_jobs}, {"gpus", gpus}});
  }
  return out;
}

absl::StatusOr<json> WinnersJson(Store& store, int max) {
  absl::StatusOr<std::vector<v1::Kernel>> kernels =
      store.ListBestKernels("", v1::LAYOUT_UNSPECIFIED, "device", 1000);
  if (!kernels.ok()) return kernels.status();
  std::stable_sort(kernels->begin(), kernels->end(), [](const v1::Kernel& a, const v1::Kernel& b) {
    return a.measurement().measured_at_unix_ms() > b.measurement().measured_at_unix_ms();
  });
  json out = json::array();
  for (const v1::Kernel& k : *kernels) {
    if (static_cast<int>(out.size()) >= max) break;
    const v1::Measurement& m = k.measurement();
    const double base = BestBaselineUs(m, "device"), us = FigureUs(m.timings(), "device");
    out.push_back({{"problem", ProblemName(m.problem())}, {"kernel", k.candidate().name()},
                   {"proposer", k.candidate().proposer()}, {"device_us", us},
                   {"speedup", us > 0 && base > 0 ? base / us : 0.0},
                   {"measured_at_unix_ms", m.measured_at_unix_ms()}});
  }
  return out;
}

// A query value with its %XX escapes (and '+' for a space) decoded.
std::string UrlDecode(absl::string_view v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    int hi = 0, lo = 0;
    if (v[i] == '%' && i + 2 < v.size() &&
        absl::ascii_isxdigit(v[i + 1]) && absl::ascii_isxdigit(v[i + 2])) {
      hi = absl::ascii_isdigit(v[i + 1]) ? v[i + 1] - '0' : absl::ascii_tolower(v[i + 1]) - 'a' + 10;
      lo = absl::ascii_isdigit(v[i + 2]) ? v[i + 2] - '0' : absl::ascii_tolower(v[i + 2]) - 'a' + 10;
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else {
      out += v[i] == '+' ? ' ' : v[i];
    }
  }
  return out;
}

// The request's credentials as an Authorization value: the header, else "?token=".
std::string Authorization(const StatusRequest& r) {
  if (!r.authorization.empty()) return r.authorization;
  for (absl::string_view kv : absl::StrSplit(r.query, '&')) {
    if (absl::ConsumePrefix(&kv, "token=")) return absl::StrCat("Bearer ", UrlDecode(kv));
  }
  return "";
}

}  // namespace

absl::StatusOr<json> BuildStatusModel(Store& store, const StatusSnapshot& snapshot,
                                      const StatusOptions& options) {
  const int64_t now = snapshot.now_unix_ms > 0
                          ? snapshot.now_unix_ms
                          : std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::system_clock::now().time_since_epoch()).count();
  std::vector<v1::Job> jobs = snapshot.jobs;
  if (jobs.empty()) {
    absl::StatusOr<std::vector<v1::Job>> stored = store.ListJobs(options.max_jobs);
    if (!stored.ok()) return stored.status();
    jobs = *std::move(stored);
  }
  std::vector<WorkerRecord> workers = snapshot.workers;
  if (workers.empty()) {
    absl::StatusOr<std::vector<WorkerRecord>> stored = store.ListWorkers();
    if (!stored.ok()) return stored.status();
    workers = *std::move(stored);
  }
  StatusSnapshot snap = snapshot;
  if (snap.leases.empty()) {
    absl::StatusOr<std::vector<LeaseInfo>> stored = StoredLeases(store);
    if (!stored.ok()) return stored.status();
    snap.leases = *std::move(stored);
  }
  json model = {{"now_unix_ms", now}, {"jobs", json::array()}};
  for (const v1::Job& job : jobs) {
    absl::StatusOr<json> j = JobJson(store, job, now);
    if (!j.ok()) return j.status();
    model["jobs"].push_back(*std::move(j));
  }
  model["workers"] = WorkersJson(snap, workers, now);
  absl::StatusOr<json> winners = WinnersJson(store, options.max_winners);
  if (!winners.ok()) return winners.status();
  model["winners"] = *std::move(winners);
  return model;
}

std::string StatusPageHtml() { return StatusTemplate(); }

StatusAuthorizer BearerToken(const std::string& token) {
  if (token.empty()) return nullptr;
  return [token](const std::string& authorization) {
    absl::string_view given = authorization;
    if (!absl::ConsumePrefix(&given, "Bearer ")) return false;
    given = absl::StripAsciiWhitespace(given);
    if (given.size() != token.size()) return false;
    unsigned char diff = 0;  // constant time in the token's length
    for (size_t i = 0; i < token.size(); ++i) diff |= static_cast<unsigned char>(given[i] ^ token[i]);
    return diff == 0;
  };
}

StatusResponse HandleStatusRequest(const StatusRequest& request, Store& store,
                                   const std::function<StatusSnapshot()>& snapshot,
                                   const StatusAuthorizer& authorized) {
  StatusResponse r;
  const bool page = request.path == "/status" || request.path == "/status/";
  if (!page && request.path != "/status.json") return r;
  r.handled = true;
  if (request.method != "GET" && request.method != "HEAD") {
    r.code = 405;
    r.body = "the status page is read-only\n";
  } else if (authorized && !authorized(Authorization(request))) {
    r.code = 401;
    r.body = "this server needs its token: /status?token=... or Authorization: Bearer ...\n";
  } else if (page) {
    r.code = 200;
    r.content_type = "text/html; charset=utf-8";
    r.body = StatusPageHtml();
  } else {
    absl::StatusOr<json> model = BuildStatusModel(store, snapshot ? snapshot() : StatusSnapshot());
    r.code = model.ok() ? 200 : 503;
    r.content_type = model.ok() ? "application/json" : r.content_type;
    r.body = model.ok() ? model->dump() : absl::StrCat("status unavailable: ", model.status().message(), "\n");
  }
  return r;
}

}  // namespace anvil::report
