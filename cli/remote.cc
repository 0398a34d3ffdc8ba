// The CLI as a client of `anvil serve` (--server HOST:PORT): optimize,
// kernels, export, jobs, workers, watch and cancel over gRPC instead of the store.
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/cli.h"
#include "cli/progress.h"
#include "proto/problem.h"
#include "server/rpc/client.h"

namespace anvil::cli {
namespace {

// Bad input and refusals are the user's to fix (2); no server or no GPU
// there is "not possible here" (3); anything else is Anvil failing (1).
ExitCode ExitFor(const absl::Status& st) {
  switch (st.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kUnauthenticated:
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kResourceExhausted:
      return kUsage;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kUnimplemented:
    case absl::StatusCode::kDeadlineExceeded:
      return kUnavailable;
    default:
      return kFailed;
  }
}

int Fail(const Globals& g, const absl::Status& st) {
  return Report(absl::Status(st.code(), absl::StrCat(g.server, ": ", st.message())), ExitFor(st));
}

absl::StatusOr<std::unique_ptr<KernelSearchClient>> Connect(const Globals& g) {
  ClientOptions o;
  o.target = g.server;
  o.tls = g.tls || !g.tls_ca.empty();
  o.ca_file = g.tls_ca;
  absl::StatusOr<std::string> token = ClientToken(g);
  if (!token.ok()) return token.status();
  o.token = *token;
  return KernelSearchClient::Connect(o);
}

// Streams a job's events, then prints its summary; the exit code follows
// the job's end state.
int FollowJob(const Globals& g, KernelSearchClient& client, const std::string& figure,
              const DisplayOptions& display_options, double budget_s,
              const std::function<absl::Status(const ProgressHandler&)>& stream) {
  v1::Job last;
  ProgressDisplay display(std::cout, display_options);
  absl::Status st = stream([&](const v1::JobProgress& p) {
    last = p.job();
    if (g.json) {
      PrintProgress(g, p);
    } else {
      display.Handle(FromJobProgress(p, budget_s));
    }
    return true;
  });
  display.Finish();
  if (!st.ok()) return Fail(g, st);
  absl::StatusOr<v1::Job> job = client.GetJob(last.id());  // the stored end state
  if (job.ok()) last = *job;
  PrintJobSummary(g, last, figure);
  return last.state() == v1::JOB_STATE_SUCCEEDED ? kOk : kFailed;
}

}  // namespace

int RunOptimizeRemote(const Globals& g, const OptimizeArgs& a) {
  absl::StatusOr<v1::OptimizeKernelRequest> req = OptimizeRequest(a);
  if (!req.ok()) return Report(req.status(), kUsage);
  absl::StatusOr<std::unique_ptr<KernelSearchClient>> client = Connect(g);
  if (!client.ok()) return Report(client.status(), kUsage);
  if (!g.json) {
    std::cout << absl::StrFormat("anvil optimize: %d problems on %s, budget %.0f min%s\n",
                                 req->problems_size(), g.server, a.budget_minutes,
                                 a.detach ? " (detached: follow with anvil watch)" : "");
  }
  if (a.detach) {  // the first event names the job; the job goes on without us
    std::string job_id;
    absl::Status st = (*client)->OptimizeKernel(*req, [&](const v1::JobProgress& p) {
      job_id = p.job().id();
      return false;
    });
    if (!st.ok()) return Fail(g, st);
    std::cout << job_id << "\n";
    return kOk;
  }
  return FollowJob(g, **client, a.figure, StdoutDisplayOptions(a.quiet, a.verbose), a.budget_minutes * 60,
                   [&](const ProgressHandler& on) { return (*client)->OptimizeKernel(*req, on); });
}

int RunWatchRemote(const Globals& g, const WatchArgs& a) {
  if (a.job.empty()) return Report(absl::InvalidArgumentError("watch --server needs a job id (anvil jobs)"), kUsage);
  absl::StatusOr<std::unique_ptr<KernelSearchClient>> client = Connect(g);
  if (!client.ok()) return Report(client.status(), kUsage);
  return FollowJob(g, **client, a.figure, StdoutDisplayOptions(a.quiet, a.verbose), 0,
                   [&](const ProgressHandler& on) { return (*client)->WatchJob(a.job, on); });
}

int RunCancelRemote(const Globals& g, const std::string& job_id) {
  absl::StatusOr<std::unique_ptr<KernelSearchClient>> client = Connect(g);
  if (!client.ok()) return Report(client.status(), kUsage);
  absl::StatusOr<v1::Job> job = (*client)->CancelJob(job_id);
  if (!job.ok()) return Fail(g, job.status());
  std::cout << (g.json ? ToJson(*job) : absl::StrCat(job->id(), " ", JobStateName(job->state()))) << "\n";
  return kOk;
}

int RunWorkers(const Globals& g, const std::string& clear_id) {
  absl::StatusOr<std::unique_ptr<KernelSearchClient>> client = Connect(g);
  if (!client.ok()) return Report(client.status(), kUsage);
  auto no_fleet = [&](const absl::Status& st) {
    if (!absl::IsUnimplemented(st)) return Fail(g, st);
    return Report(absl::UnavailableError(absl::StrCat(g.server, " runs no fleet (fleet.enabled is off)")),
                  kUnavailable);
  };
  absl::StatusOr<v1::ListWorkersResponse> all = (*client)->ListWorkers();
  if (!all.ok()) return no_fleet(all.status());
  if (!clear_id.empty()) {
    // Says whether there was a quarantine to lift (as `kubectl uncordon` says
    // "already uncordoned"); the call is made either way and is idempotent.
    bool was_quarantined = false;
    for (const v1::WorkerStatus& w : all->workers()) {
      if (w.worker_id() == clear_id) was_quarantined = w.state() == "quarantined";
    }
    absl::StatusOr<v1::WorkerStatus> w = (*client)->ClearQuarantine(clear_id);
    if (!w.ok()) return no_fleet(w.status());
    if (!g.json) {
      std::cout << (was_quarantined ? "quarantine lifted: " : "not quarantined, nothing to lift: ")
                << w->worker_id() << " (" << w->hostname() << ") is " << w->state() << "\n";
    }
    all = (*client)->ListWorkers();
  }
  if (!all.ok()) return no_fleet(all.status());
  if (g.json) {
    std::cout << ToJson(*all) << "\n";
    return kOk;
  }
  std::cout << absl::StrFormat("%-28s %-16s %-12s %-24s %11s %9s %9s %11s %8s  %s\n", "worker", "host", "state",
                               "GPUs", "build slots", "builds/m", "measure/m", "heartbeat s", "disagree",
                               "quarantine reason / latest evidence");
  for (const v1::WorkerStatus& w : all->workers()) {
    std::map<std::string, int> models;
    for (const v1::GpuInfo& gpu : w.gpus()) ++models[gpu.model()];
    std::string gpus = models.empty() ? "-" : "";
    for (const auto& [model, n] : models) absl::StrAppend(&gpus, gpus.empty() ? "" : ",", n, "x", model);
    std::cout << absl::StrFormat("%-28s %-16s %-12s %-24s %11d %9.1f %9.1f %11.1f %8d  %s\n", w.worker_id(),
                                 w.hostname(), w.state(), gpus, w.build_slots(), w.builds_per_minute(),
                                 w.measures_per_minute(), w.last_heartbeat_age_s(), w.disagreements(),
                                 w.quarantine_reason().empty() ? w.last_evidence() : w.quarantine_reason());
  }
  return kOk;
}

int RunJobsRemote(const Globals& g, const v1::ListJobsRequest& req) {
  absl::StatusOr<std::unique_ptr<KernelSearchClient>> client = Connect(g);
  if (!client.ok()) return Report(client.status(), kUsage);
  absl::StatusOr<v1::ListJobsResponse> jobs = (*client)->ListJobs(req);
  if (!jobs.ok()) return Fail(g, jobs.status());
  PrintJobs(g, *jobs);
  return kOk;
}

int RunKernelsRemote(const Globals& g, const v1::ListKernelsRequest& req) {
  absl::StatusOr<std::unique_ptr<KernelSearchClient>> client = Connect(g);
  if (!client.ok()) return Report(client.status(), kUsage);
  absl::StatusOr<v1::ListKernelsResponse> r = (*client)->ListKernels(req);
  if (!r.ok()) return Fail(g, r.status());
  std::vector<v1::Kernel> kernels(r->kernels().begin(), r->kernels().end());
  PrintKernels(g, kernels, req.figure(), absl::StrCat("the server ", g.server, "'s store"));
  return kOk;
}

int RunExportRemote(const Globals& g, const ExportArgs& a) {
  v1::ExportLibraryRequest req;
  req.set_output_dir(a.out_dir);
  req.set_gpu(a.gpu);
  req.set_margin(a.margin);
  if (!a.problems_file.empty()) {
    std::ifstream in(a.problems_file);
    if (!in) return Report(absl::NotFoundError("cannot read problems file " + a.problems_file), kUsage);
    std::stringstream text;
    text << in.rdbuf();
    absl::StatusOr<std::vector<ShapeSpec>> specs = ParseShapesFile(text.str());
    if (!specs.ok()) {
      return Report(absl::InvalidArgumentError(absl::StrCat(a.problems_file, ": ", specs.status().message())),
                    kUsage);
    }
    for (const ShapeSpec& s : *specs) {
      v1::Problem* p = req.add_problems();
      *p->mutable_shape() = s.shape;
      p->set_layout(s.layout);
    }
  }
  absl::StatusOr<std::unique_ptr<KernelSearchClient>> client = Connect(g);
  if (!client.ok()) return Report(client.status(), kUsage);
  absl::StatusOr<v1::ExportLibraryResponse> r = (*client)->ExportLibrary(req);
  if (!r.ok()) return Fail(g, r.status());
  PrintExport(g, *r);
  return kOk;
}

}  // namespace anvil::cli
