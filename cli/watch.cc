// anvil watch: follows a job through the store (read-only) until it ends,
// with the same display as `anvil optimize`: live on a terminal, plain lines
// (state changes, new bests) elsewhere. Works for any job the store holds,
// whoever runs it (a local optimize or the server on this machine).
#include <chrono>
#include <iostream>
#include <map>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "cli/cli.h"
#include "cli/progress.h"
#include "store/store.h"

namespace anvil::cli {
namespace {

std::string StateName(v1::JobState s) {
  std::string name = v1::JobState_Name(s);
  absl::string_view v = name;
  absl::ConsumePrefix(&v, "JOB_STATE_");
  return absl::AsciiStrToLower(v);
}

bool Ended(v1::JobState s) {
  return s == v1::JOB_STATE_SUCCEEDED || s == v1::JOB_STATE_FAILED || s == v1::JOB_STATE_CANCELLED;
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch()).count();
}

// One look at the store: the events since the last look, then a tick.
struct Watcher {
  Store& store;
  ProgressDisplay& display;
  std::string job_id, figure;
  int problems = 0;
  double budget_s = 0;
  std::string last_state;
  int64_t last_measurements = -1;
  std::map<std::string, double> best;

  absl::StatusOr<v1::Job> Look() {
    absl::StatusOr<v1::Job> job = store.GetJob(job_id);
    if (!job.ok()) return job.status();
    absl::StatusOr<JobActivity> activity = store.GetJobActivity(job_id, figure);
    if (!activity.ok()) return activity.status();
    ProgressEvent e;
    FillFromActivity(*activity, problems, e);
    e.state = StateName(job->state());
    e.budget_s = budget_s;
    e.elapsed_s = ((Ended(job->state()) ? job->updated_unix_ms() : NowMs()) - job->created_unix_ms()) / 1000.0;
    for (const auto& [problem, speedup] : e.best) {
      double& known = best[problem];
      if (speedup > known) Send(e, ProgressEvent::Kind::kNewBest,
                                absl::StrFormat("%-22s %.3fx -> %.3fx", problem, known, speedup));
      known = std::max(known, speedup);
    }
    if (last_measurements >= 0 && e.measurements > last_measurements) {
      Send(e, ProgressEvent::Kind::kMeasured,
           absl::StrFormat("%d measurements (+%d)", e.measurements, e.measurements - last_measurements));
    }
    last_measurements = e.measurements;
    if (e.state != last_state) {
      Send(e, ProgressEvent::Kind::kState,
           absl::StrCat("job ", job_id, " ", e.state, job->error().empty() ? "" : ": ", job->error()));
    }
    last_state = e.state;
    Send(e, ProgressEvent::Kind::kTick, "");
    return job;
  }

  void Send(ProgressEvent e, ProgressEvent::Kind kind, const std::string& message) {
    e.kind = kind;
    e.message = message;
    display.Handle(e);
  }
};

}  // namespace

int RunWatch(const Globals& g, const WatchArgs& a) {
  StoreOptions options;
  options.read_only = true;
  options.create_if_missing = false;
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(g.db, options);
  if (!store.ok()) return Report(store.status(), kDatabase);
  std::string job_id = a.job;
  if (job_id.empty()) {
    absl::StatusOr<std::vector<v1::Job>> jobs = (*store)->ListJobs(1);
    if (!jobs.ok()) return Report(jobs.status(), kDatabase);
    if (jobs->empty()) return Report(absl::NotFoundError("the store holds no job to watch"), kUsage);
    job_id = jobs->front().id();
  }
  absl::StatusOr<v1::OptimizeKernelRequest> request = (*store)->GetJobRequest(job_id);
  if (!request.ok()) return Report(request.status(), kUsage);
  ProgressDisplay display(std::cout, StdoutDisplayOptions(a.quiet, a.verbose));
  Watcher w{**store, display, job_id,
            request->reward_figure().empty() ? "device" : request->reward_figure(),
            request->problems_size(), request->budget().max_wall_seconds(), "", -1, {}};
  while (true) {
    absl::StatusOr<v1::Job> job = w.Look();
    if (!job.ok()) return Report(job.status(), kDatabase);
    if (Ended(job->state())) {
      display.Finish();
      if (a.quiet) std::cout << "job " << job_id << " " << w.last_state << "\n";
      return job->state() == v1::JOB_STATE_FAILED ? kFailed : kOk;
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(a.interval_s));
  }
}

}  // namespace anvil::cli
