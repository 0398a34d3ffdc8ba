#include "server/job_run.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "proto/problem.h"

namespace anvil {
namespace {

// Seconds since `from` by the real steady clock.
double Since(std::chrono::steady_clock::time_point from) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - from).count();
}

std::vector<std::string> Names(const std::vector<std::unique_ptr<Proposer>>& proposers) {
  std::vector<std::string> names;
  for (const auto& p : proposers) names.push_back(p->name());
  return names;
}

}  // namespace

JobRun::JobRun(std::string job_id, v1::OptimizeKernelRequest request, JobRunOptions options)
    : job_id_(std::move(job_id)), request_(std::move(request)), options_(std::move(options)),
      history_(*options_.store),
      ledger_(request_, options_.plateau_gain,
              [this](int p, const std::string& line) { Emit(JobEventKind::kProblemDone, line, p); }),
      scheduler_(Names(options_.proposers), options_.policy.get(), options_.pending_per_proposer),
      budget_(request_.budget(), options_.clock) {
  callbacks_.push_back(
      MakeCrossCheckCallback(*options_.store, options_.cross_check_tolerance, options_.quarantine_after));
  callbacks_.push_back(MakeStoreCallback(*options_.store));
  callbacks_.push_back(MakeExchangeCallback(*options_.store));
  callbacks_.push_back(MakeRewardCallback(*options_.store));
  callbacks_.push_back(MakeProgressCallback([this](JobEvent e) { Emitted(std::move(e)); }));
  usage_.resize(options_.proposers.size());
}

absl::StatusOr<v1::JobState> JobRun::Run() {
  budget_.Start();
  real_start_ = std::chrono::steady_clock::now();
  if (absl::Status st = Init(); !st.ok()) return st;
  Emit(JobEventKind::kState, absl::StrFormat("running: %d problems, %d proposers, figure %s",
                                             ledger_.size(), options_.proposers.size(),
                                             request_.reward_figure()));
  absl::StatusOr<v1::JobState> end = Loop();
  if (!end.ok() || *end != v1::JOB_STATE_UNSPECIFIED) return end;
  if (absl::Status st = Checkpoint(); !st.ok()) return st;
  const CoordinatorTime c = Coordinator();
  Emit(JobEventKind::kLog,
       absl::StrFormat("coordinator overhead: %.2f ms per candidate (%d candidates; of %.1f s wall, "
                       "%.1f s waiting on the evaluator (%.1f s of it on builds, nothing to measure), "
                       "%.1f s in the proposers, %.2f s scheduling, storing and reporting)",
                       c.overhead_ms_per_candidate(), c.candidates, c.wall_seconds, c.evaluator_seconds,
                       c.build_wait_seconds, c.proposer_seconds, c.overhead_seconds()));
  return stopped_ ? v1::JOB_STATE_RUNNING : v1::JOB_STATE_SUCCEEDED;
}

// Rounds until the job ends: each round's candidates are measured as their
// builds end, and the next round builds while this one is measured; then the
// proposers' re-checks (the final phase).
// UNSPECIFIED: the rounds ended (budget spent, nothing more to propose, or
// stopped), for Run to finish; any other state or an error ends the run as is.
absl::StatusOr<v1::JobState> JobRun::Loop() {
  std::optional<Round> next;  // picked, its builds under way
  while (true) {
    if (cancelled_) return v1::JOB_STATE_CANCELLED;
    if (stopped_) break;
    if (final_phase_ && ++final_rounds_ > kMaxFinalRounds) break;  // a proposer re-checking forever
    if (!final_phase_ && BudgetSpent()) {
      if (absl::Status st = FinalPhase(); !st.ok()) return Interrupted(st);
    }
    if (!next) {
      absl::StatusOr<std::optional<Round>> r = PrepareRound();
      if (!r.ok()) return r.status();
      next = *std::move(r);
    }
    if (!next) {
      if (final_phase_) break;
      // Every proposer is done: verify what they report.
      if (absl::Status st = FinalPhase(); !st.ok()) return Interrupted(st);
      continue;
    }
    Round round = *std::move(next);
    next.reset();
    // What is built is measured while the rest builds; the next round builds
    // once this one's builds are done, while this one is still measured.
    absl::Status st = MeasureRound(round, ledger_.keyed() && !final_phase_ ? &next : nullptr);
    if (!st.ok()) return Interrupted(st);
  }
  if (absl::Status st = StopRounds(std::move(next)); !st.ok()) return st;
  return v1::JOB_STATE_UNSPECIFIED;
}

// A round picked and built but not measured when the job stops: its
// proposals are skipped (the build cache keeps what was built).
absl::Status JobRun::StopRounds(std::optional<Round> next) {
  if (!next) return absl::OkStatus();
  (void)FinishBuilds(*next);
  std::vector<Observation> unmeasured;
  next->moved.resize(next->obs.size(), false);
  for (size_t i = 0; i < next->obs.size(); ++i) {
    if (next->moved[i]) continue;  // the round before measured it
    Observation& o = next->obs[i];
    o.outcome = Outcome::kSkipped;
    o.reason = "the job stopped";
    o.measured_on.clear();
    unmeasured.push_back(std::move(o));
  }
  Release(unmeasured);
  return ObserveAll(unmeasured);
}

absl::Status JobRun::Init() {
  absl::StatusOr<v1::Job> job = options_.store->GetJob(job_id_);
  if (!job.ok()) return job.status();
  budget_.SetPrior(job->wall_seconds(), job->gpu_seconds());
  std::optional<v1::RunnerInfo> device = options_.evaluator->device();
  if (!device && job->problems_size() > 0 && !job->problems(0).problem().gpu().empty()) {
    // An earlier run learnt the GPU: resume on its keys, so not even the
    // first measurement repeats one (the evaluator must then agree).
    device.emplace();
    device->set_gpu(job->problems(0).problem().gpu());
    device->set_arch(job->problems(0).problem().arch());
  }
  if (device) return SetKeys(*device);
  return absl::OkStatus();
}

absl::Status JobRun::SetKeys(const v1::RunnerInfo& device) {
  return ledger_.SetKeys(device, *options_.store, job_id_);
}

absl::StatusOr<v1::JobState> JobRun::Interrupted(const absl::Status& status) {
  if (!absl::IsCancelled(status) || !(cancelled_ || stopped_)) return status;
  if (cancelled_) return v1::JOB_STATE_CANCELLED;
  if (absl::Status st = Checkpoint(); !st.ok()) return st;
  return v1::JOB_STATE_RUNNING;
}

WorkContext JobRun::Context() const {
  return WorkContext{job_id_, [this] { return cancelled_.load() || stopped_.load(); }};
}

void JobRun::NoteWaiting() {
  std::string now = options_.evaluator->Waiting();
  if (now == waiting_) return;
  const bool resumed = now.empty();
  waiting_ = std::move(now);
  Emit(JobEventKind::kLog, resumed ? std::string("the evaluator is progressing again") : absl::StrCat("waiting: ", waiting_));
}

SearchView JobRun::View(int proposer) {
  SearchView view;
  view.job_id = job_id_;
  view.figure = request_.reward_figure();
  view.problems = ledger_.views();
  view.device = options_.evaluator->device();
  view.elapsed_seconds = budget_.Elapsed();
  view.budget_seconds = budget_.RunSeconds();
  view.final_phase = final_phase_;
  view.history = &history_;
  view.records = &records_;
  view.note = [this, name = options_.proposers[proposer]->name()](const std::string& line) {
    Emit(JobEventKind::kLog, line, -1, name);
  };
  return view;
}

int JobRun::ProposerIndex(const Observation& o) const {
  for (size_t i = 0; i < options_.proposers.size(); ++i) {
    if (options_.proposers[i]->name() == o.proposal.candidate.proposer()) return static_cast<int>(i);
  }
  return 0;
}

bool JobRun::BudgetSpent() {
  std::string why = budget_.Spent();
  if (why.empty() && ledger_.keyed() && !ledger_.AnyActive()) why = "every problem's own budget";
  if (why.empty()) return false;
  Emit(JobEventKind::kLog, absl::StrCat("budget spent (", why, "): verifying what the proposers report"));
  return true;
}

// The budget is spent or every proposer is done: pending proposals other than
// re-checks are skipped, and the proposers are asked for their re-checks.
absl::Status JobRun::FinalPhase() {
  final_phase_ = true;
  scheduler_.ResetExhausted();
  std::vector<Observation> skipped;
  for (Pending& p : scheduler_.TakeAllButRechecks()) {
    Observation o;
    o.proposal = std::move(p.proposal);
    o.proposal.candidate.set_proposer(options_.proposers[p.proposer]->name());
    o.reason = "the job's budget is spent";
    skipped.push_back(std::move(o));
  }
  return skipped.empty() ? absl::OkStatus() : ObserveAll(skipped);
}

// Adds this run's spend since the last checkpoint to the job and stores each
// problem's progress: what a restarted server resumes from.
absl::Status JobRun::Checkpoint() {
  const auto [wall, gpu] = budget_.TakeUncheckpointed();
  if (absl::Status st = options_.store->AddJobUsage(job_id_, wall, gpu); !st.ok()) return st;
  if (!ledger_.keyed()) return absl::OkStatus();
  for (int p = 0; p < ledger_.size(); ++p) {
    if (absl::Status u = options_.store->UpdateJobProblem(job_id_, ledger_.Progress(p)); !u.ok()) return u;
  }
  return absl::OkStatus();
}

absl::Status JobRun::ObserveAll(std::vector<Observation>& round) {
  std::map<int, std::vector<Observation>> by;
  for (Observation& o : round) by[ProposerIndex(o)].push_back(std::move(o));
  const auto told_at = std::chrono::steady_clock::now();
  for (auto& [i, obs] : by) options_.proposers[i]->Observe(View(i), obs);
  coordinator_.proposer_seconds += Since(told_at);
  return KeepRecords();
}

// Hands what the proposers asked to keep (SearchView::records) to the
// measure callbacks, as a round with no observations.
absl::Status JobRun::KeepRecords() {
  if (records_.empty()) return absl::OkStatus();
  std::vector<Observation> none;
  std::vector<ProposerRecord> records = std::move(records_);
  records_.clear();
  return Persist(none, {}, std::move(records));
}

// Runs the measure callbacks over a round (or over records alone).
absl::Status JobRun::Persist(std::vector<Observation>& round, std::vector<v1::LtAlgo> tuned,
                             std::vector<ProposerRecord> records) {
  MeasuredRound mr;
  mr.job_id = job_id_;
  mr.figure = request_.reward_figure();
  mr.problems = &ledger_.views();
  mr.observations = &round;
  mr.tuned = std::move(tuned);
  mr.records = std::move(records);
  for (const auto& cb : callbacks_) {
    if (absl::Status st = cb->Apply(mr); !st.ok()) return st;
  }
  return absl::OkStatus();
}

CoordinatorTime JobRun::Coordinator() const {
  CoordinatorTime c = coordinator_;
  c.wall_seconds = Since(real_start_);
  return c;
}

void JobRun::Emit(JobEventKind kind, std::string message, int problem, std::string proposer) {
  JobEvent e;
  e.kind = kind;
  e.message = std::move(message);
  e.problem = problem;
  e.proposer = std::move(proposer);
  Emitted(std::move(e));
}

void JobRun::Emitted(JobEvent e) {
  if (!options_.emit) return;
  e.job = Snapshot(v1::JOB_STATE_RUNNING);
  e.usage.wall_seconds = budget_.wall();
  e.usage.gpu_seconds = budget_.gpu();
  e.usage.max_wall_seconds = request_.budget().max_wall_seconds();
  e.usage.max_gpu_seconds = request_.budget().max_gpu_seconds();
  for (const ProblemView& v : ledger_.views()) e.usage.candidates += v.tried_this_job;
  for (size_t i = 0; i < usage_.size(); ++i) e.usage.by_proposer[options_.proposers[i]->name()] = usage_[i];
  e.usage.coordinator = Coordinator();
  options_.emit(e);
}

v1::Job JobRun::Snapshot(v1::JobState state) const {
  v1::Job job;
  job.set_id(job_id_);
  job.set_state(state);
  job.set_wall_seconds(budget_.wall());
  job.set_gpu_seconds(budget_.gpu());
  for (int p = 0; p < ledger_.size(); ++p) *job.add_problems() = ledger_.Progress(p);
  return job;
}

}  // namespace anvil
