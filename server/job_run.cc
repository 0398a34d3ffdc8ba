#include "server/job_run.h"

#include <algorithm>
#include <limits>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "proto/problem.h"
#include "reward/reward.h"

namespace anvil {
namespace {

using Clock = std::chrono::steady_clock;

bool Passed(const v1::Measurement& m) { return m.verdict() == v1::VERDICT_PASSED; }

// The cuBLAS version a runner reported ("... cublas=130100 ..."), as the
// runner keys its tuned cuBLASLt choices.
std::string CublasVersion(const v1::RunnerInfo& info) {
  for (absl::string_view part : absl::StrSplit(info.versions(), ' ')) {
    if (absl::ConsumePrefix(&part, "cublas=")) return std::string(part);
  }
  return "";
}

}  // namespace

JobRun::JobRun(std::string job_id, v1::OptimizeKernelRequest request, JobRunOptions options)
    : job_id_(std::move(job_id)), request_(std::move(request)), options_(std::move(options)),
      history_(*options_.store) {
  callbacks_.push_back(
      MakeCrossCheckCallback(*options_.store, options_.cross_check_tolerance, options_.quarantine_after));
  callbacks_.push_back(MakeStoreCallback(*options_.store));
  callbacks_.push_back(MakeRewardCallback(*options_.store));
  callbacks_.push_back(MakeProgressCallback([this](JobEvent e) { Emitted(std::move(e)); }));
  usage_.resize(options_.proposers.size());
  pending_count_.assign(options_.proposers.size(), 0);
  in_flight_.assign(options_.proposers.size(), 0);
  exhausted_.assign(options_.proposers.size(), false);
}

namespace {

// Seconds since `from` by the real steady clock.
double Since(std::chrono::steady_clock::time_point from) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - from).count();
}

}  // namespace

CoordinatorTime JobRun::Coordinator() const {
  CoordinatorTime c = coordinator_;
  c.wall_seconds = Since(real_start_);
  return c;
}

double JobRun::Elapsed() const {
  const Clock::time_point now = options_.clock ? options_.clock() : Clock::now();
  return std::chrono::duration<double>(now - start_).count();
}

WorkContext JobRun::Context() const {
  return WorkContext{job_id_, [this] { return cancelled_.load() || stopped_.load(); }};
}

absl::StatusOr<v1::JobState> JobRun::Interrupted(const absl::Status& status) {
  if (!absl::IsCancelled(status) || !(cancelled_ || stopped_)) return status;
  if (cancelled_) return v1::JOB_STATE_CANCELLED;
  if (absl::Status st = Checkpoint(); !st.ok()) return st;
  return v1::JOB_STATE_RUNNING;
}

void JobRun::NoteWaiting() {
  std::string now = options_.evaluator->Waiting();
  if (now == waiting_) return;
  const bool resumed = now.empty();
  waiting_ = std::move(now);
  Emit(JobEventKind::kLog, resumed ? std::string("the evaluator is progressing again") : absl::StrCat("waiting: ", waiting_));
}

absl::StatusOr<v1::JobState> JobRun::Run() {
  start_ = options_.clock ? options_.clock() : Clock::now();
  real_start_ = std::chrono::steady_clock::now();
  if (absl::Status st = Init(); !st.ok()) return st;
  Emit(JobEventKind::kState, absl::StrFormat("running: %d problems, %d proposers, figure %s",
                                             problems_.size(), options_.proposers.size(),
                                             request_.reward_figure()));
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
    if (absl::Status st = FinishBuilds(round); !st.ok()) return Interrupted(st);
    if (keyed_ && !final_phase_) {  // the next round builds while this one is measured
      absl::StatusOr<std::optional<Round>> r = PrepareRound();
      if (!r.ok()) return r.status();
      next = *std::move(r);
    }
    if (absl::Status st = MeasureRound(round); !st.ok()) return Interrupted(st);
  }
  if (next) {
    (void)FinishBuilds(*next);  // built, not measured: the build cache keeps them
    std::vector<Observation> unmeasured;
    for (Observation& o : next->obs) {
      o.outcome = Outcome::kSkipped;
      o.reason = "the job stopped";
      o.measured_on.clear();
      unmeasured.push_back(std::move(o));
    }
    Release(unmeasured);
    ObserveAll(unmeasured);
  }
  if (absl::Status st = Checkpoint(); !st.ok()) return st;
  const CoordinatorTime c = Coordinator();
  Emit(JobEventKind::kLog,
       absl::StrFormat("coordinator overhead: %.2f ms per candidate (%d candidates; of %.1f s wall, "
                       "%.1f s waiting on the evaluator, %.1f s in the proposers, %.2f s scheduling, "
                       "storing and reporting)",
                       c.overhead_ms_per_candidate(), c.candidates, c.wall_seconds, c.evaluator_seconds,
                       c.proposer_seconds, c.overhead_seconds()));
  return stopped_ ? v1::JOB_STATE_RUNNING : v1::JOB_STATE_SUCCEEDED;
}

absl::Status JobRun::Init() {
  absl::StatusOr<v1::Job> job = options_.store->GetJob(job_id_);
  if (!job.ok()) return job.status();
  prior_wall_ = job->wall_seconds();
  prior_gpu_ = job->gpu_seconds();
  for (const v1::Problem& p : request_.problems()) {
    ProblemView v;
    v.spec = {p.shape(), p.layout()};
    v.problem = p;
    v.name = absl::StrCat(ShapeName(p.shape()), " ", LayoutName(p.layout()));
    problems_.push_back(std::move(v));
  }
  state_.resize(problems_.size());
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

// The GPU is part of every problem key: set once the evaluator knows it.
absl::Status JobRun::SetKeys(const v1::RunnerInfo& device) {
  for (ProblemView& v : problems_) {
    if (!v.problem.gpu().empty() && v.problem.gpu() != device.gpu()) {
      return absl::UnavailableError(absl::StrCat("problem ", v.name, " asks for GPU ", v.problem.gpu(),
                                                 " but this evaluator measures on ", device.gpu()));
    }
    v.problem = MakeProblem(device.gpu(), device.arch(), v.spec.shape, v.spec.layout);
  }
  keyed_ = true;
  return LoadHistory();
}

// What the store holds on these problems: every job's measured pairs (not
// measured again), this job's tries, bests and plateau counters.
absl::Status JobRun::LoadHistory() {
  for (size_t p = 0; p < problems_.size(); ++p) {
    absl::StatusOr<std::vector<StoredMeasurement>> h = options_.store->SearchHistory(problems_[p].problem);
    if (!h.ok()) return h.status();
    ProblemView& v = problems_[p];
    v.tried = v.tried_this_job = 0;
    v.best_us = v.best_baseline_us = 0;
    state_[p] = ProblemState{};
    for (const StoredMeasurement& m : *h) {
      // A row measured before the job's figure existed (a store from before
      // graph-replay timing) leaves its pair to be measured again.
      const v1::Measurement& x = m.measurement;
      if (!PredatesFigure(x, request_.reward_figure())) state_[p].measured.insert(x.candidate_id());
      ++v.tried;
      if (m.job_id == job_id_) Take(static_cast<int>(p), m.measurement, m.measurement.verified());
    }
    UpdateStatus(static_cast<int>(p));
  }
  return absl::OkStatus();
}

// Takes one of this job's measurements into its problem's bests and plateau.
void JobRun::Take(int p, const v1::Measurement& m, bool verified) {
  ProblemView& v = problems_[p];
  ProblemState& s = state_[p];
  const bool fresh = s.tried.insert(m.candidate_id()).second;  // a re-check is no new try
  v.tried_this_job = static_cast<int>(s.tried.size());
  const double us = Passed(m) ? FigureUs(m.timings(), request_.reward_figure()) : 0;
  const bool gain = us > 0 && (v.best_us <= 0 || us < v.best_us * (1 - options_.plateau_gain));
  if (fresh) s.since_gain = gain ? 0 : s.since_gain + 1;
  if (!verified && !m.gpu_uuid().empty()) s.measured_by[m.candidate_id()].insert(m.gpu_uuid());
  if (us > 0 && (v.best_us <= 0 || us < v.best_us)) {
    v.best_us = us;
    v.best_baseline_us = BestBaselineUs(m, request_.reward_figure());
    s.best_id = m.candidate_id();
  }
  if (verified && us > 0 && (s.verified_us <= 0 || us < s.verified_us)) {
    s.verified_id = m.candidate_id();
    s.verified_us = us;
    s.verified_baseline_us = BestBaselineUs(m, request_.reward_figure());
  }
  const double target = request_.budget().target_efficiency();
  if (target > 0 && Passed(m) && m.efficiency() >= target && s.status.empty()) s.status = "target";
}

void JobRun::UpdateStatus(int p) {
  ProblemView& v = problems_[p];
  ProblemState& s = state_[p];
  const v1::Budget& b = request_.budget();
  if (s.status.empty() && b.max_candidates() > 0 && v.tried_this_job >= b.max_candidates()) {
    s.status = "candidates";
  }
  if (s.status.empty() && b.plateau_candidates() > 0 && s.since_gain >= b.plateau_candidates()) {
    s.status = "plateau";
  }
  if (!s.status.empty() && v.active) {
    v.active = false;
    Emit(JobEventKind::kProblemDone,
         absl::StrFormat("%-22s done (%s): %d candidates in this job", v.name, s.status, v.tried_this_job), p);
  }
}

SearchView JobRun::View() {
  SearchView view;
  view.job_id = job_id_;
  view.figure = request_.reward_figure();
  view.problems = problems_;
  view.device = options_.evaluator->device();
  view.elapsed_seconds = Elapsed();
  const double wall = request_.budget().max_wall_seconds();
  view.budget_seconds = wall > 0 ? std::max(0.0, wall - prior_wall_) : 0;
  view.final_phase = final_phase_;
  view.history = &history_;
  return view;
}

// Asks proposers, in the share policy's order, for proposals up to each one's
// pending allowance; each proposer at most once per refill.
absl::Status JobRun::Refill() {
  std::vector<std::string> names;
  for (const auto& p : options_.proposers) names.push_back(p->name());
  std::vector<bool> asked(options_.proposers.size(), false);
  while (true) {
    std::vector<bool> unavailable = exhausted_;
    for (size_t i = 0; i < asked.size(); ++i) unavailable[i] = unavailable[i] || asked[i];
    const int i = options_.policy->Next(names, usage_, unavailable);
    if (i < 0 || i >= static_cast<int>(asked.size()) || unavailable[i]) return absl::OkStatus();
    asked[i] = true;
    const int n = options_.pending_per_proposer - pending_count_[i];
    if (n <= 0) continue;
    const auto asked_at = std::chrono::steady_clock::now();
    absl::StatusOr<std::vector<Proposal>> got = options_.proposers[i]->Propose(View(), n);
    coordinator_.proposer_seconds += Since(asked_at);
    if (!got.ok()) return got.status();
    if (got->empty() && pending_count_[i] == 0 && in_flight_[i] == 0 && !final_phase_) exhausted_[i] = true;
    for (Proposal& p : *got) {
      ++pending_count_[i];
      ++usage_[i].proposed;
      if (p.candidate.proposer().empty()) p.candidate.set_proposer(names[i]);
      pool_.push_back({std::move(p), i, seq_++});
    }
  }
}

// The least-served problem a pending proposal would still be measured on
// (its candidates in this job, and in the round being picked); proposals for no active problem come first
// (they are skipped at once).
int JobRun::ServedKey(const Pending& pending) const {
  int key = std::numeric_limits<int>::max();
  for (int p : pending.proposal.problems) {
    if (p < 0 || p >= static_cast<int>(problems_.size())) continue;
    if (!problems_[p].active && !pending.proposal.recheck) continue;
    const int load = p < static_cast<int>(round_load_.size()) ? round_load_[p] : 0;
    key = std::min(key, problems_[p].tried_this_job + load);
  }
  return key == std::numeric_limits<int>::max() ? -1 : key;
}

// The pending proposal of `proposer` serving the least-served problem
// (ties: the order proposed), taken out of the pool.
std::optional<JobRun::Pending> JobRun::TakeNext(int proposer) {
  auto best = pool_.end();
  for (auto it = pool_.begin(); it != pool_.end(); ++it) {
    if (it->proposer != proposer) continue;
    if (best == pool_.end() || ServedKey(*it) < ServedKey(*best)) best = it;
  }
  if (best == pool_.end()) return std::nullopt;
  Pending p = std::move(*best);
  pool_.erase(best);
  --pending_count_[proposer];
  return p;
}

// One round: each slot goes to the proposer the share policy names (by GPU
// time spent, this round's planned measurements counted), and of its
// proposals to the one serving the least-served problem, so no layout or
// family waits behind another's long plan. Before the GPU is known, one
// proposal (the probe).
std::vector<JobRun::Pending> JobRun::PickRound() {
  std::vector<std::string> names;
  for (const auto& p : options_.proposers) names.push_back(p->name());
  std::vector<ProposerUsage> usage = usage_;
  const size_t n = keyed_ ? static_cast<size_t>(std::max(1, options_.build_chunk)) : 1;
  std::vector<Pending> out;
  round_load_.assign(problems_.size(), 0);  // what this round gives each problem so far
  while (out.size() < n) {
    std::vector<bool> empty(names.size());
    for (size_t i = 0; i < names.size(); ++i) empty[i] = pending_count_[i] == 0;
    const int i = options_.policy->Next(names, usage, empty);
    if (i < 0 || i >= static_cast<int>(names.size()) || empty[i]) break;
    std::optional<Pending> p = TakeNext(i);
    if (!p) break;
    usage[i].gpu_seconds += static_cast<double>(p->proposal.problems.size());
    for (int q : p->proposal.problems) {
      if (q >= 0 && q < static_cast<int>(round_load_.size())) ++round_load_[q];
    }
    out.push_back(std::move(*p));
  }
  round_load_.clear();
  for (const Pending& p : out) ++in_flight_[p.proposer];
  return out;
}

// Which of a proposal's problems it will be measured on: in range, of its
// layout, active (or a re-check), not measured before (unless a re-check),
// each once. A probe measures one problem.
Observation JobRun::Precheck(Pending& pending, bool probe) {
  Observation o;
  o.proposal = std::move(pending.proposal);
  o.proposal.candidate.set_proposer(options_.proposers[pending.proposer]->name());
  std::vector<int> keep;
  std::string why = SkipNow(o.proposal);  // stopping, out of budget, past its deadline
  for (int p : why.empty() ? o.proposal.problems : std::vector<int>{}) {
    if (p < 0 || p >= static_cast<int>(problems_.size()) ||
        problems_[p].spec.layout != o.proposal.candidate.layout()) {
      why = "a problem index out of range or of another layout";
    } else if (final_phase_ && !o.proposal.recheck) {
      why = "the job's budget is spent";
    } else if (!problems_[p].active && !o.proposal.recheck) {
      why = absl::StrCat("the problem's budget is spent (", state_[p].status, ")");
    } else if (!o.proposal.recheck && (state_[p].measured.count(o.proposal.candidate.id()) ||
                                         planned_pairs_.count({o.proposal.candidate.id(), p}))) {
      why = "measured on the problem before";
    } else if (!o.proposal.recheck && request_.budget().max_candidates() > 0 &&
               problems_[p].tried_this_job + PlannedOn(p) >= request_.budget().max_candidates()) {
      why = "the problem's candidate budget is spent";
    } else if (std::find(keep.begin(), keep.end(), p) == keep.end() && !(probe && !keep.empty())) {
      keep.push_back(p);
      if (!o.proposal.recheck) planned_pairs_.insert({o.proposal.candidate.id(), p});
    }
  }
  o.measured_on = std::move(keep);
  o.reason = o.measured_on.empty() ? why : "";
  return o;
}

int JobRun::ProposerIndex(const Observation& o) const {
  for (size_t i = 0; i < options_.proposers.size(); ++i) {
    if (options_.proposers[i]->name() == o.proposal.candidate.proposer()) return static_cast<int>(i);
  }
  return 0;
}

// Picks a round, prechecks it, and starts building what it has not built in
// this run (on another thread: the evaluator may build while it measures).
absl::StatusOr<std::optional<JobRun::Round>> JobRun::PrepareRound() {
  if (absl::Status st = Refill(); !st.ok()) return st;
  std::vector<Pending> picked = PickRound();
  if (picked.empty()) return std::optional<Round>();
  const bool probe = !keyed_;
  Round r;
  for (Pending& p : picked) r.obs.push_back(Precheck(p, probe));
  std::vector<v1::Candidate> to_build;
  for (size_t i = 0; i < r.obs.size(); ++i) {
    Observation& o = r.obs[i];
    if (o.measured_on.empty()) continue;
    auto it = built_.find(o.proposal.candidate.id());
    if (it != built_.end()) {
      o.build = it->second;
      continue;
    }
    r.to_build.push_back(i);
    to_build.push_back(o.proposal.candidate);
  }
  if (!to_build.empty()) {
    CandidateEvaluator* evaluator = options_.evaluator;
    r.builds = std::async(std::launch::async, [evaluator, context = Context(), to_build = std::move(to_build)] {
      return evaluator->Build(to_build, context);
    });
  }
  return std::optional<Round>(std::move(r));
}

// Waits for a round's builds; a failed build is measured nowhere.
absl::Status JobRun::FinishBuilds(Round& r) {
  if (!r.builds.valid()) return absl::OkStatus();
  const auto waited_from = std::chrono::steady_clock::now();
  while (r.builds.wait_for(std::chrono::seconds(1)) != std::future_status::ready) NoteWaiting();
  std::vector<absl::StatusOr<v1::Build>> builds = r.builds.get();
  coordinator_.evaluator_seconds += Since(waited_from);
  if (builds.size() != r.to_build.size()) return absl::InternalError("the evaluator answered fewer builds");
  for (size_t k = 0; k < builds.size(); ++k) {
    if (!builds[k].ok()) return builds[k].status();
    Observation& o = r.obs[r.to_build[k]];
    o.build = *builds[k];
    if (builds[k]->verdict() == v1::VERDICT_PASSED) {
      built_[o.proposal.candidate.id()] = *builds[k];
    } else {
      o.outcome = Outcome::kBuildFailed;
      o.measured_on.clear();
      ++coordinator_.candidates;
    }
  }
  return absl::OkStatus();
}

// Whether a built proposal is no longer to be measured: the job stops, its
// budget is spent (re-checks excepted), or the proposer's deadline passed.
std::string JobRun::SkipNow(const Proposal& p) {
  if (cancelled_ || stopped_) return "the job stopped";
  if (p.recheck) return "";
  if (final_phase_) return "the job's budget is spent";
  const v1::Budget& b = request_.budget();
  if ((b.max_wall_seconds() > 0 && prior_wall_ + Elapsed() >= b.max_wall_seconds()) ||
      (b.max_gpu_seconds() > 0 && prior_gpu_ + gpu_ >= b.max_gpu_seconds())) {
    return "the job's budget is spent";
  }
  if (p.measure_by > 0 && Elapsed() >= p.measure_by) return "the proposer's deadline passed";
  return "";
}

// Whether a built proposal is to be measured now, and on what: a proposal not
// to be measured goes to `rest` with its reason.
std::optional<MeasureRequest> JobRun::Admit(Observation& o, std::vector<Observation>& rest) {
  if (o.measured_on.empty() || o.outcome == Outcome::kBuildFailed) {
    rest.push_back(std::move(o));
    return std::nullopt;
  }
  std::string why = SkipNow(o.proposal);
  if (!o.proposal.recheck) {  // a problem may have stopped since the round was picked
    std::erase_if(o.measured_on, [this](int p) { return !problems_[p].active; });
    if (why.empty() && o.measured_on.empty()) why = "the problem's budget is spent";
  }
  if (!why.empty()) {
    o.reason = why;
    o.measured_on.clear();
    rest.push_back(std::move(o));
    return std::nullopt;
  }
  MeasureRequest req;
  req.candidate = o.proposal.candidate;
  req.build = *o.build;
  req.recheck = o.proposal.recheck;
  for (int p : o.measured_on) {
    req.shapes.push_back(problems_[p].spec.shape);
    const auto& by = state_[p].measured_by;
    if (auto it = by.find(o.proposal.candidate.id()); req.recheck && it != by.end()) {
      req.measured_by.insert(req.measured_by.end(), it->second.begin(), it->second.end());
    }
  }
  req.known_lt_algos = StoredLtAlgos(o.measured_on);
  return req;
}

// A measured proposal, finished at once: its proposer sees it before the
// proposals admitted after it.
absl::Status JobRun::Complete(Observation o, std::vector<absl::StatusOr<MeasureResult>> results) {
  ++coordinator_.candidates;
  if (results.empty()) return absl::InternalError("the evaluator answered no measurement");
  if (!results[0].ok()) return results[0].status();
  o.outcome = Outcome::kMeasured;
  o.measurements = std::move(results[0]->measurements);
  o.measurements.resize(std::min(o.measurements.size(), o.measured_on.size()));
  o.measured_on.resize(o.measurements.size());
  gpu_ += results[0]->gpu_seconds;
  usage_[ProposerIndex(o)].gpu_seconds += results[0]->gpu_seconds;
  std::vector<Observation> one;
  one.push_back(std::move(o));
  return Finish(one, std::move(results[0]->tuned), false);
}

// Measures the round's built proposals, each in its own runner process, as
// many at once as the evaluator has GPU slots (one on a local GPU: one at a
// time), in the round's order. The budget is checked before each is sent, and
// each is finished as it comes back; the rest (failed builds, skipped) and the
// checkpoint come at the round's end.
absl::Status JobRun::MeasureRound(Round& r) {
  struct InFlight {
    Observation obs;
    std::future<std::vector<absl::StatusOr<MeasureResult>>> results;
  };
  absl::Mutex mu;              // declared before `flying`: outlives the threads it joins
  std::vector<int> came_back;  // guarded by mu: sent measurements that have come back
  std::vector<Observation> rest;
  std::map<int, InFlight> flying;  // by the order sent; their futures join on every way out
  CandidateEvaluator* evaluator = options_.evaluator;
  int sent = 0;
  size_t next = 0;
  while (next < r.obs.size() || !flying.empty()) {
    const size_t slots = static_cast<size_t>(std::max(1, evaluator->MeasureSlots()));
    while (next < r.obs.size() && flying.size() < slots) {
      Observation& o = r.obs[next++];
      std::optional<MeasureRequest> req = Admit(o, rest);
      if (!req) continue;
      const int id = sent++;
      flying[id] = {std::move(o), std::async(std::launch::async, [evaluator, &mu, &came_back, id,
                                                                  context = Context(), req = *std::move(req)] {
                      std::vector<absl::StatusOr<MeasureResult>> got = evaluator->Measure({req}, context);
                      absl::MutexLock lock(&mu);
                      came_back.push_back(id);
                      return got;
                    })};
    }
    if (flying.empty()) break;
    const auto waited_from = std::chrono::steady_clock::now();
    int id = 0;
    for (bool got = false; !got;) {
      {
        absl::MutexLock lock(&mu);
        got = mu.AwaitWithTimeout(absl::Condition(+[](std::vector<int>* v) { return !v->empty(); }, &came_back),
                                  absl::Seconds(1));
        if (got) {
          id = came_back.front();
          came_back.erase(came_back.begin());
        }
      }
      if (!got) NoteWaiting();  // a fleet with no live worker able to measure says so
    }
    auto it = flying.find(id);
    std::vector<absl::StatusOr<MeasureResult>> results = it->second.results.get();
    coordinator_.evaluator_seconds += Since(waited_from);
    Observation o = std::move(it->second.obs);
    flying.erase(it);
    if (absl::Status st = Complete(std::move(o), std::move(results)); !st.ok()) return st;
  }
  return Finish(rest, {}, true);
}

// The store's cuBLASLt choices for these problems, each problem's once per
// run, marked retune: the first runner tunes again with it among the
// contenders, and the winner replaces it (a choice that once lost to noise
// does not stay for good).
std::vector<v1::LtAlgo> JobRun::StoredLtAlgos(const std::vector<int>& problems) {
  std::vector<v1::LtAlgo> out;
  const std::optional<v1::RunnerInfo> device = options_.evaluator->device();
  if (!device || !keyed_) return out;
  const std::string version = CublasVersion(*device);
  for (int p : problems) {
    if (!lt_looked_up_.insert(p).second) continue;
    absl::StatusOr<std::vector<LtAlgo>> stored = options_.store->GetLtAlgos(problems_[p].problem, version);
    if (!stored.ok()) continue;
    for (const LtAlgo& choice : *stored) {  // one per figure it was tuned by
      v1::LtAlgo& a = out.emplace_back();
      *a.mutable_shape() = problems_[p].spec.shape;
      a.set_layout(problems_[p].spec.layout);
      a.set_algo(choice.algo);
      a.set_cublas_version(version);
      a.set_gpu(device->gpu());
      a.set_figure(choice.figure);
      a.set_retune(true);
    }
  }
  return out;
}

// Forgets a round's in-flight bookkeeping (picked, not yet observed).
void JobRun::Release(const std::vector<Observation>& round) {
  for (const Observation& o : round) {
    --in_flight_[ProposerIndex(o)];
    if (o.proposal.recheck) continue;
    for (int p : o.proposal.problems) planned_pairs_.erase({o.proposal.candidate.id(), p});
  }
}

int JobRun::PlannedOn(int p) const {
  int n = 0;
  for (const auto& [id, q] : planned_pairs_) n += q == p;
  return n;
}

// Persists the round (callbacks), accounts for it, checkpoints the job and
// tells the proposers.
absl::Status JobRun::Finish(std::vector<Observation>& round, std::vector<v1::LtAlgo> tuned,
                            bool checkpoint) {
  MeasuredRound mr;
  mr.job_id = job_id_;
  mr.figure = request_.reward_figure();
  mr.problems = &problems_;
  mr.observations = &round;
  mr.tuned = std::move(tuned);
  for (const auto& cb : callbacks_) {
    if (absl::Status st = cb->Apply(mr); !st.ok()) return st;
  }
  const std::optional<v1::RunnerInfo> device = options_.evaluator->device();
  if (keyed_ && device && device->gpu() != problems_[0].problem.gpu()) {
    return absl::UnavailableError(absl::StrCat("job ", job_id_, " was measured on ", problems_[0].problem.gpu(),
                                               "; this evaluator measures on ", device->gpu()));
  }
  if (keyed_) {
    Account(round);
  } else if (std::optional<v1::RunnerInfo> device = options_.evaluator->device()) {
    if (absl::Status st = SetKeys(*device); !st.ok()) return st;  // its history has this round
  }
  for (const Observation& o : round) {
    ProposerUsage& u = usage_[ProposerIndex(o)];
    u.built += o.build.has_value();
    u.build_failures += o.outcome == Outcome::kBuildFailed;
    u.measurements += static_cast<int>(o.measurements.size());
  }
  if (checkpoint) {
    if (absl::Status st = Checkpoint(); !st.ok()) return st;
  }
  Release(round);
  ObserveAll(round);
  return absl::OkStatus();
}

void JobRun::Account(const std::vector<Observation>& round) {
  for (const Observation& o : round) {
    for (size_t j = 0; j < o.measurements.size(); ++j) {
      const int p = o.measured_on[j];
      const std::string before = state_[p].best_id;
      problems_[p].tried += state_[p].measured.insert(o.proposal.candidate.id()).second;
      Take(p, o.measurements[j], o.measurements[j].verified());
      if (state_[p].best_id != before) ++usage_[ProposerIndex(o)].improvements;
      UpdateStatus(p);
    }
  }
}

v1::ProblemProgress JobRun::Progress(int p) const {
  const ProblemView& v = problems_[p];
  const ProblemState& s = state_[p];
  v1::ProblemProgress pp;
  *pp.mutable_problem() = v.problem;
  pp.set_candidates_tried(v.tried_this_job);
  pp.set_status(s.status);
  if (!s.verified_id.empty()) {  // the figures of its verified re-measurement
    pp.set_best_candidate_id(s.verified_id);
    pp.set_best_us(s.verified_us);
    pp.set_best_baseline_us(s.verified_baseline_us);
    pp.set_speedup(s.verified_baseline_us / s.verified_us);
  } else {
    pp.set_best_baseline_us(v.best_baseline_us);
  }
  return pp;
}

// Adds this run's spend since the last checkpoint to the job and stores each
// problem's progress: what a restarted server resumes from.
absl::Status JobRun::Checkpoint() {
  const double wall = Elapsed();
  absl::Status st = options_.store->AddJobUsage(job_id_, wall - checkpointed_wall_, gpu_ - checkpointed_gpu_);
  if (!st.ok()) return st;
  checkpointed_wall_ = wall;
  checkpointed_gpu_ = gpu_;
  if (!keyed_) return absl::OkStatus();
  for (size_t p = 0; p < problems_.size(); ++p) {
    if (absl::Status u = options_.store->UpdateJobProblem(job_id_, Progress(static_cast<int>(p))); !u.ok()) {
      return u;
    }
  }
  return absl::OkStatus();
}

void JobRun::ObserveAll(std::vector<Observation>& round) {
  std::map<int, std::vector<Observation>> by;
  for (Observation& o : round) by[ProposerIndex(o)].push_back(std::move(o));
  const auto told_at = std::chrono::steady_clock::now();
  for (auto& [i, obs] : by) options_.proposers[i]->Observe(View(), obs);
  coordinator_.proposer_seconds += Since(told_at);
}

bool JobRun::BudgetSpent() {
  const v1::Budget& b = request_.budget();
  std::string why;
  if (b.max_wall_seconds() > 0 && prior_wall_ + Elapsed() >= b.max_wall_seconds()) {
    why = absl::StrFormat("wall time %.0f s", b.max_wall_seconds());
  } else if (b.max_gpu_seconds() > 0 && prior_gpu_ + gpu_ >= b.max_gpu_seconds()) {
    why = absl::StrFormat("GPU time %.0f s", b.max_gpu_seconds());
  } else if (keyed_ && std::none_of(problems_.begin(), problems_.end(),
                                    [](const ProblemView& v) { return v.active; })) {
    why = "every problem's own budget";
  }
  if (why.empty()) return false;
  Emit(JobEventKind::kLog, absl::StrCat("budget spent (", why, "): verifying what the proposers report"));
  return true;
}

// The budget is spent or every proposer is done: pending proposals other than
// re-checks are skipped, and the proposers are asked for their re-checks.
absl::Status JobRun::FinalPhase() {
  final_phase_ = true;
  exhausted_.assign(exhausted_.size(), false);
  SkipPending("the job's budget is spent");
  return absl::OkStatus();
}

void JobRun::SkipPending(const std::string& reason) {
  std::vector<Observation> skipped;
  std::vector<Pending> keep;
  for (Pending& p : pool_) {
    if (p.proposal.recheck) {
      keep.push_back(std::move(p));
      continue;
    }
    --pending_count_[p.proposer];
    Observation o;
    o.proposal = std::move(p.proposal);
    o.proposal.candidate.set_proposer(options_.proposers[p.proposer]->name());
    o.reason = reason;
    skipped.push_back(std::move(o));
  }
  pool_ = std::move(keep);
  if (!skipped.empty()) ObserveAll(skipped);
}

void JobRun::Emit(JobEventKind kind, std::string message, int problem) {
  JobEvent e;
  e.kind = kind;
  e.message = std::move(message);
  e.problem = problem;
  Emitted(std::move(e));
}

void JobRun::Emitted(JobEvent e) {
  if (!options_.emit) return;
  e.job = Snapshot(v1::JOB_STATE_RUNNING);
  e.usage.wall_seconds = prior_wall_ + Elapsed();
  e.usage.gpu_seconds = prior_gpu_ + gpu_;
  e.usage.max_wall_seconds = request_.budget().max_wall_seconds();
  e.usage.max_gpu_seconds = request_.budget().max_gpu_seconds();
  for (const ProblemView& v : problems_) e.usage.candidates += v.tried_this_job;
  for (size_t i = 0; i < usage_.size(); ++i) e.usage.by_proposer[options_.proposers[i]->name()] = usage_[i];
  e.usage.coordinator = Coordinator();
  options_.emit(e);
}

v1::Job JobRun::Snapshot(v1::JobState state) const {
  v1::Job job;
  job.set_id(job_id_);
  job.set_state(state);
  job.set_wall_seconds(prior_wall_ + Elapsed());
  job.set_gpu_seconds(prior_gpu_ + gpu_);
  for (size_t p = 0; p < problems_.size(); ++p) *job.add_problems() = Progress(static_cast<int>(p));
  return job;
}

}  // namespace anvil
