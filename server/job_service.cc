#include "server/job_service.h"

#include <chrono>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "absl/strings/str_cat.h"
#include "proto/candidate.h"
#include "proto/problem.h"
#include "reward/reward.h"
#include "server/job_run.h"

namespace anvil {

struct JobService::Watcher {
  absl::Mutex mu;
  bool active ABSL_GUARDED_BY(mu) = true;
  bool ended ABSL_GUARDED_BY(mu) = false;  // the job's final state was delivered
  std::function<void(const JobEvent&)> fn;
};

namespace {

bool Ended(v1::JobState s) {
  return s != v1::JOB_STATE_QUEUED && s != v1::JOB_STATE_RUNNING && s != v1::JOB_STATE_UNSPECIFIED;
}

}  // namespace

class JobService::WatchHandle : public Watch {
 public:
  WatchHandle(JobService* service, std::string job_id, std::shared_ptr<Watcher> w)
      : service_(service), job_id_(std::move(job_id)), w_(std::move(w)) {}
  ~WatchHandle() override {
    {
      absl::MutexLock lock(&w_->mu);  // waits for a callback in flight
      w_->active = false;
    }
    absl::MutexLock lock(&service_->mu_);
    auto [from, to] = service_->watchers_.equal_range(job_id_);
    for (auto it = from; it != to; ++it) {
      if (it->second == w_) {
        service_->watchers_.erase(it);
        break;
      }
    }
  }

 private:
  JobService* service_;
  std::string job_id_;
  std::shared_ptr<Watcher> w_;
};

absl::StatusOr<std::unique_ptr<JobService>> JobService::Create(JobServiceOptions options) {
  if (options.store == nullptr || options.evaluator == nullptr || !options.proposers) {
    return absl::InvalidArgumentError("a job service needs a store, an evaluator and proposers");
  }
  if (!IsFigure(options.default_figure)) {
    return absl::InvalidArgumentError(absl::StrCat("unknown default figure '", options.default_figure, "'"));
  }
  if (!options.share_policy) options.share_policy = MakeEqualSharePolicy;
  if (!options.new_job_id) {
    options.new_job_id = [] {
      return absl::StrCat("job-", std::chrono::system_clock::now().time_since_epoch().count());
    };
  }
  return std::unique_ptr<JobService>(new JobService(std::move(options)));
}

JobService::JobService(JobServiceOptions options) : options_(std::move(options)) {}

JobService::~JobService() { Shutdown(); }

// The request as the job will run it: problems validated (dtype defaulted),
// the figure and every zero budget field from the service's defaults.
absl::StatusOr<v1::OptimizeKernelRequest> JobService::Complete(
    const v1::OptimizeKernelRequest& request) const {
  v1::OptimizeKernelRequest r = request;
  if (r.problems().empty()) return absl::InvalidArgumentError("the request has no problems");
  for (v1::Problem& p : *r.mutable_problems()) {
    if (p.dtype() == v1::DTYPE_UNSPECIFIED) p.set_dtype(v1::DTYPE_F16_F32ACC);
    if (absl::Status st = ValidateProblem(p); !st.ok()) return st;
  }
  if (r.reward_figure().empty()) r.set_reward_figure(options_.default_figure);
  if (!IsFigure(r.reward_figure())) {
    return absl::InvalidArgumentError(absl::StrCat("unknown reward figure '", r.reward_figure(), "'"));
  }
  const v1::Budget& d = options_.default_budget;
  v1::Budget* b = r.mutable_budget();
  if (absl::Status st = CheckBudget(*b); !st.ok()) return st;
  if (b->max_candidates() == 0) b->set_max_candidates(d.max_candidates());
  if (b->max_wall_seconds() == 0) b->set_max_wall_seconds(d.max_wall_seconds());
  if (b->max_gpu_seconds() == 0) b->set_max_gpu_seconds(d.max_gpu_seconds());
  if (b->plateau_candidates() == 0) b->set_plateau_candidates(d.plateau_candidates());
  if (b->target_efficiency() == 0) b->set_target_efficiency(d.target_efficiency());
  return r;
}

absl::StatusOr<v1::Job> JobService::CreateJob(const v1::OptimizeKernelRequest& request,
                                              const std::string& request_id) {
  if (!request.resume_job_id().empty()) return GetJob(request.resume_job_id());
  absl::StatusOr<v1::OptimizeKernelRequest> r = Complete(request);
  if (!r.ok()) return r.status();
  // The proposers named must exist before the job does.
  if (absl::StatusOr<std::vector<std::unique_ptr<Proposer>>> p = options_.proposers(*r); !p.ok()) {
    return p.status();
  }
  std::string job_id = options_.new_job_id();
  if (request_id.empty()) {
    if (absl::Status st = options_.store->CreateJob(job_id, *r); !st.ok()) return st;
  } else {
    std::string body;
    google::protobuf::io::StringOutputStream out(&body);
    {
      google::protobuf::io::CodedOutputStream coded(&out);
      coded.SetSerializationDeterministic(true);
      request.SerializeToCodedStream(&coded);
    }
    absl::StatusOr<std::string> id =
        options_.store->CreateJobForRequest(job_id, *r, request_id, Sha256Hex(body));
    if (!id.ok()) return id.status();
    job_id = *id;
  }
  return options_.store->GetJob(job_id);
}

absl::StatusOr<std::shared_ptr<JobRun>> JobService::Prepare(const std::string& job_id) {
  absl::StatusOr<v1::Job> job = options_.store->GetJob(job_id);
  if (!job.ok()) return job.status();
  if (job->state() != v1::JOB_STATE_QUEUED && job->state() != v1::JOB_STATE_RUNNING) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job_id, " has ended (", v1::JobState_Name(job->state()), ")"));
  }
  absl::StatusOr<v1::OptimizeKernelRequest> request = options_.store->GetJobRequest(job_id);
  if (!request.ok()) return request.status();
  absl::StatusOr<std::vector<std::unique_ptr<Proposer>>> proposers = options_.proposers(*request);
  if (!proposers.ok()) return proposers.status();
  JobRunOptions o;
  static_cast<JobOptions&>(o) = options_;
  o.store = options_.store;
  o.evaluator = options_.evaluator;
  o.proposers = std::move(*proposers);
  o.policy = options_.share_policy();
  o.clock = options_.clock;
  o.emit = [this, job_id](const JobEvent& e) { Emit(job_id, e); };
  auto run = std::make_shared<JobRun>(job_id, *std::move(request), std::move(o));
  {
    absl::MutexLock lock(&mu_);
    if (!running_.emplace(job_id, run).second) {
      return absl::FailedPreconditionError(absl::StrCat("job ", job_id, " is running already"));
    }
  }
  options_.evaluator->JobStarting(job_id);  // an earlier run's work waits to be taken over
  return run;
}

absl::StatusOr<v1::Job> JobService::RunJob(const std::string& job_id) {
  absl::StatusOr<std::shared_ptr<JobRun>> run = Prepare(job_id);
  if (!run.ok()) return run.status();
  absl::Status st = options_.store->UpdateJobState(job_id, v1::JOB_STATE_RUNNING);
  absl::StatusOr<v1::JobState> end = st.ok() ? (*run)->Run() : absl::StatusOr<v1::JobState>(st);
  return Finish(job_id, **run, end);
}

// Writes how the run ended, tells the watchers, and forgets the run.
absl::StatusOr<v1::Job> JobService::Finish(const std::string& job_id, JobRun& run,
                                           const absl::StatusOr<v1::JobState>& end) {
  {
    absl::MutexLock lock(&mu_);
    running_.erase(job_id);
  }
  // A job cancelled while it ended is cancelled: CancelJob said so already.
  const v1::JobState state = run.cancelled() ? v1::JOB_STATE_CANCELLED : end.ok() ? *end : v1::JOB_STATE_FAILED;
  absl::Status st = options_.store->UpdateJobState(
      job_id, state, end.ok() || state == v1::JOB_STATE_CANCELLED ? "" : std::string(end.status().message()));
  options_.evaluator->JobStopped(job_id, Ended(state));
  absl::StatusOr<v1::Job> job = options_.store->GetJob(job_id);
  JobEvent e;
  e.kind = JobEventKind::kState;
  e.job = job.ok() ? *job : run.Snapshot(state);
  e.message = end.ok() ? absl::StrCat("job ", v1::JobState_Name(state))
                       : absl::StrCat("job failed: ", end.status().message());
  Emit(job_id, e);
  if (!st.ok()) return st;
  return job;
}

absl::Status JobService::StartJob(const std::string& job_id) {
  absl::StatusOr<std::shared_ptr<JobRun>> run = Prepare(job_id);
  if (!run.ok()) return run.status();
  absl::MutexLock lock(&mu_);
  auto old = threads_.find(job_id);
  if (old != threads_.end()) {
    old->second.join();  // an earlier run of it, ended
    threads_.erase(old);
  }
  threads_.emplace(job_id, std::thread([this, job_id, r = *run] {
    absl::Status st = options_.store->UpdateJobState(job_id, v1::JOB_STATE_RUNNING);
    (void)Finish(job_id, *r, st.ok() ? r->Run() : absl::StatusOr<v1::JobState>(st));
  }));
  return absl::OkStatus();
}

absl::StatusOr<int> JobService::ResumeInterrupted() {
  int started = 0;
  for (v1::JobState s : {v1::JOB_STATE_RUNNING, v1::JOB_STATE_QUEUED}) {
    absl::StatusOr<std::vector<v1::Job>> jobs = options_.store->ListJobs(1000, s);
    if (!jobs.ok()) return jobs.status();
    for (const v1::Job& j : *jobs) {
      absl::Status st = StartJob(j.id());
      if (st.ok()) {
        ++started;
        continue;
      }
      // This job cannot go on; the others can.
      const std::string why = absl::StrCat("could not be resumed: ", st.message());
      if (absl::Status failed = options_.store->UpdateJobState(j.id(), v1::JOB_STATE_FAILED, why); !failed.ok()) {
        return failed;
      }
      options_.evaluator->JobStopped(j.id(), true);
    }
  }
  return started;
}

absl::StatusOr<v1::Job> JobService::CancelJob(const std::string& job_id) {
  absl::StatusOr<v1::Job> job = options_.store->GetJob(job_id);
  if (!job.ok()) return job.status();
  if (job->state() != v1::JOB_STATE_QUEUED && job->state() != v1::JOB_STATE_RUNNING) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job_id, " has ended (", v1::JobState_Name(job->state()), ")"));
  }
  bool running = false;
  {
    absl::MutexLock lock(&mu_);
    auto it = running_.find(job_id);
    running = it != running_.end();
    if (running) it->second->Cancel();  // its waits on the evaluator end now
  }
  if (absl::Status st = options_.store->UpdateJobState(job_id, v1::JOB_STATE_CANCELLED); !st.ok()) {
    return st;
  }
  // A running job drops its work as it ends (Finish); one that is not
  // running here has nobody else to do it.
  if (!running) options_.evaluator->JobStopped(job_id, true);
  return options_.store->GetJob(job_id);
}

absl::StatusOr<v1::Job> JobService::GetJob(const std::string& job_id) {
  return options_.store->GetJob(job_id);
}

absl::StatusOr<std::vector<v1::Job>> JobService::ListJobs(int limit, v1::JobState state) {
  return options_.store->ListJobs(limit, state);
}

absl::StatusOr<std::unique_ptr<Watch>> JobService::WatchJob(
    const std::string& job_id, std::function<void(const JobEvent&)> fn) {
  if (absl::StatusOr<v1::Job> known = options_.store->GetJob(job_id); !known.ok()) return known.status();
  auto w = std::make_shared<Watcher>();
  w->fn = std::move(fn);
  // Registered before the state is read, and holding its lock until the first
  // event is delivered: a job ending meanwhile either wrote its end state
  // before the read below (the first event is final) or emits it after (it
  // waits for the lock, then arrives second). Either way the final state
  // arrives, exactly once.
  w->mu.Lock();
  {
    absl::MutexLock lock(&mu_);
    watchers_.emplace(job_id, w);
  }
  auto handle = std::unique_ptr<Watch>(new WatchHandle(this, job_id, w));
  absl::StatusOr<v1::Job> job = options_.store->GetJob(job_id);
  if (job.ok()) {
    JobEvent first;
    first.kind = JobEventKind::kState;
    first.job = *job;
    first.message = absl::StrCat("job ", v1::JobState_Name(job->state()));
    w->ended = Ended(job->state());
    w->fn(first);
  }
  w->mu.Unlock();
  if (!job.ok()) return job.status();  // the handle unregisters it
  return handle;
}

void JobService::Emit(const std::string& job_id, const JobEvent& event) {
  std::vector<std::shared_ptr<Watcher>> to;
  {
    absl::MutexLock lock(&mu_);
    auto [from, end] = watchers_.equal_range(job_id);
    for (auto it = from; it != end; ++it) to.push_back(it->second);
  }
  const bool final = event.kind == JobEventKind::kState && Ended(event.job.state());
  for (const auto& w : to) {
    absl::MutexLock lock(&w->mu);
    if (!w->active || w->ended) continue;  // nothing follows a job's final state
    w->ended = final;
    w->fn(event);
  }
}

void JobService::Shutdown() {
  std::map<std::string, std::thread> threads;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [id, run] : running_) run->Stop();
    threads.swap(threads_);
  }
  for (auto& [id, t] : threads) {
    if (t.joinable()) t.join();
  }
}

}  // namespace anvil
