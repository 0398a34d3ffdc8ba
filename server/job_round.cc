// JobRun's pipeline of one round (job_run.h): pick, precheck, build (while the
// round before is measured), measure as many at once as the evaluator has GPU
// slots, then persist through the measure callbacks and tell the proposers.
#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "server/job_run.h"

namespace anvil {
namespace {

// Seconds since `from` by the real steady clock.
double Since(std::chrono::steady_clock::time_point from) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - from).count();
}

// The cuBLAS version a runner reported ("... cublas=130100 ..."), as the
// runner keys its tuned cuBLASLt choices.
std::string CublasVersion(const v1::RunnerInfo& info) {
  for (absl::string_view part : absl::StrSplit(info.versions(), ' ')) {
    if (absl::ConsumePrefix(&part, "cublas=")) return std::string(part);
  }
  return "";
}

}  // namespace

// Picks a round, prechecks it, and starts building what it has not built in
// this run (on another thread: the evaluator may build while it measures).
// Before the GPU is known, a round is the probe: a proposal of each layout at
// most (kProbeProposals), each on one problem.
absl::StatusOr<std::optional<JobRun::Round>> JobRun::PrepareRound() {
  const auto propose = [this](int i, int n) -> absl::StatusOr<std::vector<Proposal>> {
    const auto asked_at = std::chrono::steady_clock::now();
    absl::StatusOr<std::vector<Proposal>> got = options_.proposers[i]->Propose(View(i), n);
    coordinator_.proposer_seconds += Since(asked_at);
    const absl::Status kept = KeepRecords();  // even of a failed call: what it made before
    if (got.ok() && !kept.ok()) return kept;
    return got;
  };
  if (absl::Status st = scheduler_.Refill(propose, usage_, final_phase_); !st.ok()) return st;
  const bool probe = !ledger_.keyed();
  const size_t n = probe ? kProbeProposals : static_cast<size_t>(std::max(1, options_.build_chunk));
  // What is built already (idle work, a candidate on more problems) rides
  // along beside the round's n builds, a call's worth at most.
  const auto built = [this](const Proposal& p) { return built_.count(p.candidate.id()) > 0; };
  std::vector<Pending> picked = scheduler_.PickRound(
      n, ledger_.views(), usage_, built, probe ? 0 : static_cast<size_t>(std::max(0, options_.measure_batch)));
  if (picked.empty()) return std::optional<Round>();
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
  r.build_known.assign(r.to_build.size(), false);
  if (!to_build.empty()) {
    CandidateEvaluator* evaluator = options_.evaluator;
    std::shared_ptr<RoundSync> sync = r.sync;
    WorkContext context = Context();
    context.built = [sync](size_t k, const absl::StatusOr<v1::Build>& b) {
      absl::MutexLock lock(&sync->mu);
      sync->built.emplace_back(k, b);
    };
    r.builds = std::async(std::launch::async, [evaluator, sync, context = std::move(context),
                                                to_build = std::move(to_build)] {
      std::vector<absl::StatusOr<v1::Build>> got = evaluator->Build(to_build, context);
      absl::MutexLock lock(&sync->mu);
      sync->builds_done = true;
      return got;
    });
  }
  return std::optional<Round>(std::move(r));
}

bool JobRun::Round::Built(size_t i) const {
  const auto it = std::find(to_build.begin(), to_build.end(), i);
  return it == to_build.end() || build_known[static_cast<size_t>(it - to_build.begin())];
}

// Which of a proposal's problems it will be measured on: in range, of its
// layout, active (or a re-check), not measured before (unless a re-check),
// each once. A probe measures one problem.
Observation JobRun::Precheck(Pending& pending, bool probe) {
  Observation o;
  o.proposal = std::move(pending.proposal);
  o.proposal.candidate.set_proposer(options_.proposers[pending.proposer]->name());
  const std::string& id = o.proposal.candidate.id();
  const bool recheck = o.proposal.recheck;
  const int max_candidates = request_.budget().max_candidates();
  std::vector<int> keep;
  std::string why = SkipNow(o.proposal);  // stopping, out of budget, past its deadline
  for (int p : why.empty() ? o.proposal.problems : std::vector<int>{}) {
    if (p < 0 || p >= ledger_.size() || ledger_.view(p).spec.layout != o.proposal.candidate.layout()) {
      why = "a problem index out of range or of another layout";
    } else if (final_phase_ && !recheck) {
      why = "the job's budget is spent";
    } else if (!ledger_.view(p).active && !recheck) {
      why = absl::StrCat("the problem's budget is spent (", ledger_.status(p), ")");
    } else if (!recheck && (ledger_.Measured(p, id) || scheduler_.Planned(id, p))) {
      why = "measured on the problem before";
    } else if (!recheck && max_candidates > 0 &&
               ledger_.view(p).tried_this_job + scheduler_.PlannedOn(p) >= max_candidates) {
      why = "the problem's candidate budget is spent";
    } else if (std::find(keep.begin(), keep.end(), p) == keep.end() && !(probe && !keep.empty())) {
      keep.push_back(p);
      if (!recheck) scheduler_.Plan(id, p);
    }
  }
  o.measured_on = std::move(keep);
  o.reason = o.measured_on.empty() ? why : "";
  return o;
}

// A build that has ended, into its observation: a failed one is measured nowhere.
absl::Status JobRun::ApplyBuild(Round& r, size_t k, const absl::StatusOr<v1::Build>& build) {
  if (k >= r.to_build.size() || r.build_known[k]) return absl::OkStatus();
  if (!build.ok()) return build.status();
  r.build_known[k] = true;
  Observation& o = r.obs[r.to_build[k]];
  o.build = *build;
  if (build->verdict() == v1::VERDICT_PASSED) {
    built_[o.proposal.candidate.id()] = *build;
  } else {
    o.outcome = Outcome::kBuildFailed;
    o.measured_on.clear();
    ++coordinator_.candidates;
  }
  return absl::OkStatus();
}

absl::Status JobRun::TakeBuilds(Round& r) {
  std::vector<std::pair<size_t, absl::StatusOr<v1::Build>>> arrived;
  bool done = false;
  {
    absl::MutexLock lock(&r.sync->mu);
    arrived.swap(r.sync->built);
    done = r.sync->builds_done;
  }
  for (const auto& [k, build] : arrived) {
    if (absl::Status st = ApplyBuild(r, k, build); !st.ok()) return st;
  }
  if (!done || !r.builds.valid()) return absl::OkStatus();
  std::vector<absl::StatusOr<v1::Build>> builds = r.builds.get();  // those not streamed
  if (builds.size() != r.to_build.size()) return absl::InternalError("the evaluator answered fewer builds");
  for (size_t k = 0; k < builds.size(); ++k) {
    if (absl::Status st = ApplyBuild(r, k, builds[k]); !st.ok()) return st;
  }
  return absl::OkStatus();
}

// Waits for every build of the round.
absl::Status JobRun::FinishBuilds(Round& r) {
  if (!r.builds.valid()) return TakeBuilds(r);
  const auto waited_from = std::chrono::steady_clock::now();
  while (r.builds.wait_for(std::chrono::seconds(1)) != std::future_status::ready) NoteWaiting();
  coordinator_.evaluator_seconds += Since(waited_from);
  return TakeBuilds(r);
}

// Whether a built proposal is no longer to be measured: the job stops, its
// budget is spent (re-checks excepted), or the proposer's deadline passed or
// will have by the time the measurements ahead of it in its call are done
// (`ahead_s`).
std::string JobRun::SkipNow(const Proposal& p, double ahead_s) {
  if (cancelled_ || stopped_) return "the job stopped";
  if (p.recheck) return "";
  if (final_phase_ || !budget_.Spent().empty()) return "the job's budget is spent";
  if (p.measure_by > 0 && budget_.Elapsed() + ahead_s >= p.measure_by) return "the proposer's deadline passed";
  return "";
}

// Whether a built proposal is to be measured now, and on what: a proposal not
// to be measured goes to `rest` with its reason.
std::optional<MeasureRequest> JobRun::Admit(Observation& o, std::vector<Observation>& rest,
                                            double ahead_s) {
  if (o.measured_on.empty() || o.outcome == Outcome::kBuildFailed) {
    rest.push_back(std::move(o));
    return std::nullopt;
  }
  std::string why = SkipNow(o.proposal, ahead_s);
  if (!o.proposal.recheck) {  // a problem may have stopped since the round was picked
    std::erase_if(o.measured_on, [this](int p) { return !ledger_.view(p).active; });
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
    req.shapes.push_back(ledger_.view(p).spec.shape);
    if (!req.recheck) continue;
    for (std::string& gpu : ledger_.MeasuredBy(p, o.proposal.candidate.id())) {
      req.measured_by.push_back(std::move(gpu));
    }
  }
  req.known_lt_algos = StoredLtAlgos(o.measured_on);
  req.fidelity = req.recheck ? v1::FIDELITY_FULL : o.proposal.fidelity;
  req.figure = request_.reward_figure();
  return req;
}

// The next call of a round: its first built, unsent proposal alone when that
// is a full measurement or a re-check, else its built screens up to
// options_.measure_batch items (one runner process: each problem's baselines
// timed once), each admitted with the time the items before it will take,
// in this call and in those in flight (`ahead_s`); while a problem has no
// measurement, each problem once at most. Proposals not to be measured go to
// `rest`.
JobRun::Call JobRun::NextCall(Round& r, std::vector<bool>& handled, std::vector<Observation>& rest,
                              double ahead_s) {
  Call call;
  size_t items = 0;
  // Until every active problem has a measurement (in the job's first
  // kCoverSeconds: a problem no proposal can run must not keep calls small),
  // a call takes each problem once at most: small calls, so that a problem
  // whose first candidates built late is not queued behind a full batch of
  // the others.
  const bool covering = ledger_.keyed() && budget_.Elapsed() < kCoverSeconds && UnmeasuredProblems();
  std::set<int> in_call;
  for (size_t i = 0; i < r.obs.size(); ++i) {
    if (handled[i] || !r.Built(i)) continue;
    Observation& o = r.obs[i];
    const bool screen = o.proposal.fidelity == v1::FIDELITY_SCREEN && !o.proposal.recheck;
    const bool repeats = covering && std::any_of(o.measured_on.begin(), o.measured_on.end(),
                                                 [&](int p) { return in_call.count(p) > 0; });
    if (!call.requests.empty() &&
        (!screen || call.requests.front().fidelity != v1::FIDELITY_SCREEN || repeats ||
         items >= static_cast<size_t>(std::max(1, options_.measure_batch)))) {
      break;
    }
    in_call.insert(o.measured_on.begin(), o.measured_on.end());
    handled[i] = true;
    std::optional<MeasureRequest> req =
        Admit(o, rest, ahead_s + static_cast<double>(items) * seconds_per_item_);
    if (!req) continue;
    items += req->shapes.size();
    call.requests.push_back(*std::move(req));
    call.obs.push_back(std::move(o));
  }
  call.projected_s = static_cast<double>(items) * seconds_per_item_;
  return call;
}

// Whether an active problem has no measurement in this job yet.
bool JobRun::UnmeasuredProblems() const {
  for (int p = 0; p < ledger_.size(); ++p) {
    if (ledger_.view(p).active && ledger_.view(p).tried_this_job == 0) return true;
  }
  return false;
}

// Waits for a call to come back (its id) or a build to end (nullopt); with
// nothing in flight the GPU is waiting on the builds.
std::optional<int> JobRun::AwaitCallOrBuild(Round& r, bool idle) {
  const auto waited_from = std::chrono::steady_clock::now();
  std::optional<int> id;
  {
    RoundSync::Wake wake{r.sync.get(), r.builds.valid()};
    absl::MutexLock lock(&r.sync->mu);
    const bool any = r.sync->mu.AwaitWithTimeout(absl::Condition(&RoundSync::Woken, &wake), absl::Seconds(1));
    if (any && !r.sync->came_back.empty()) {
      id = r.sync->came_back.front();
      r.sync->came_back.erase(r.sync->came_back.begin());
    }
  }
  coordinator_.evaluator_seconds += Since(waited_from);
  if (idle) coordinator_.build_wait_seconds += Since(waited_from);
  if (!id) NoteWaiting();  // a fleet with no live worker able to measure says so
  return id;
}

// Measures the round's proposals as their builds end, as many calls at once
// as the evaluator takes (MeasureSlots: a local GPU measures one and holds
// the next), built ones in the round's order (NextCall). The budget is
// checked as each call is made up, and each proposal is finished as its call
// comes back; the rest (failed builds, skipped) and the checkpoint come at
// the round's end. Once every build has ended, the next round is picked and
// starts building (`next`), so the GPU never waits on a whole round's
// builds; once this round has nothing left to send, the next round's built
// proposals move into it (MoveBuilt), so the GPU does not wait on the
// round's end either. A call that would wait behind another is made up only
// shortly before that one is projected to end (kFormAheadSeconds), so that
// it takes whatever has been built by then.
absl::Status JobRun::MeasureRound(Round& r, std::optional<Round>* next) {
  std::shared_ptr<RoundSync> sync = r.sync;
  std::vector<Observation> rest;
  std::vector<bool> handled = r.moved;  // what an earlier round took is not this round's
  handled.resize(r.obs.size(), false);
  std::map<int, Call> flying;  // by the order sent; their futures join on every way out
  CandidateEvaluator* evaluator = options_.evaluator;
  std::optional<Round>* prepared = nullptr;  // the next round, once picked
  int sent = 0;
  auto unhandled = [&] { return std::find(handled.begin(), handled.end(), false) != handled.end(); };
  while (unhandled() || !flying.empty()) {
    if (absl::Status st = TakeBuilds(r); !st.ok()) return st;
    while (flying.size() < static_cast<size_t>(std::max(1, evaluator->MeasureSlots())) &&
           FormNow(flying)) {
      double ahead_s = 0;
      for (const auto& [_, f] : flying) ahead_s += f.projected_s;
      Call call = NextCall(r, handled, rest, ahead_s);
      if (call.requests.empty() && prepared != nullptr && prepared->has_value() && !unhandled()) {
        if (absl::Status st = MoveBuilt(**prepared, r, handled); !st.ok()) return st;
        call = NextCall(r, handled, rest, ahead_s);
      }
      if (call.requests.empty()) break;
      const int id = sent++;
      call.sent_at = std::chrono::steady_clock::now();
      call.results = std::async(std::launch::async, [evaluator, sync, id, context = Context(),
                                                     requests = call.requests] {
        std::vector<absl::StatusOr<MeasureResult>> got = evaluator->Measure(requests, context);
        absl::MutexLock lock(&sync->mu);
        sync->came_back.push_back(id);
        return got;
      });
      flying[id] = std::move(call);
    }
    if (next != nullptr && !next->has_value() && r.AllBuilt() && !final_phase_) {
      absl::StatusOr<std::optional<Round>> picked = PrepareRound();
      if (!picked.ok()) return picked.status();
      *next = *std::move(picked);
      prepared = next;
      next = nullptr;  // picked once, even when there was nothing to pick
      continue;        // what it picked may be sent at once
    }
    if (!unhandled() && flying.empty()) break;
    const std::optional<int> id = AwaitCallOrBuild(r, flying.empty());
    if (!id) continue;
    auto it = flying.find(*id);
    std::vector<absl::StatusOr<MeasureResult>> results = it->second.results.get();
    Call done = std::move(it->second);
    flying.erase(it);
    if (results.size() != done.obs.size()) return absl::InternalError("the evaluator answered fewer measurements");
    for (size_t k = 0; k < done.obs.size(); ++k) {
      if (absl::Status st = Complete(std::move(done.obs[k]), std::move(results[k])); !st.ok()) return st;
    }
  }
  return Finish(rest, {}, true);
}

// Whether to make up another call now: a GPU is free, or the call would
// wait for one (CandidateEvaluator::WaitingSlots) and a call in flight is
// projected to end within kFormAheadSeconds.
bool JobRun::FormNow(const std::map<int, Call>& flying) const {
  const CandidateEvaluator& e = *options_.evaluator;
  const size_t gpus = static_cast<size_t>(std::max(1, e.MeasureSlots() - e.WaitingSlots()));
  if (flying.size() < gpus) return true;
  for (const auto& [_, c] : flying) {
    if (c.projected_s - Since(c.sent_at) <= kFormAheadSeconds) return true;
  }
  return false;
}

// Moves the next round's proposals whose builds are known (and that are to
// be measured) into this round, which has nothing left to send: measured
// now, finished with this round, skipped by the next.
absl::Status JobRun::MoveBuilt(Round& from, Round& into, std::vector<bool>& handled) {
  if (absl::Status st = TakeBuilds(from); !st.ok()) return st;
  from.moved.resize(from.obs.size(), false);
  for (size_t i = 0; i < from.obs.size(); ++i) {
    Observation& o = from.obs[i];
    if (from.moved[i] || !from.Built(i) || o.measured_on.empty() || !o.build) continue;
    from.moved[i] = true;
    into.obs.push_back(std::move(o));
    handled.push_back(false);
  }
  return absl::OkStatus();
}

// A measured proposal, finished at once: its proposer sees it before the
// proposals admitted after it.
absl::Status JobRun::Complete(Observation o, absl::StatusOr<MeasureResult> result) {
  ++coordinator_.candidates;
  if (!result.ok()) return result.status();
  o.outcome = Outcome::kMeasured;
  o.measurements = std::move(result->measurements);
  o.measurements.resize(std::min(o.measurements.size(), o.measured_on.size()));
  o.measured_on.resize(o.measurements.size());
  budget_.AddGpu(result->gpu_seconds);
  usage_[ProposerIndex(o)].gpu_seconds += result->gpu_seconds;
  if (!o.measurements.empty() && result->gpu_seconds > 0) {  // what an item costs, lately
    const double per_item = result->gpu_seconds / static_cast<double>(o.measurements.size());
    seconds_per_item_ = seconds_per_item_ > 0 ? 0.8 * seconds_per_item_ + 0.2 * per_item : per_item;
  }
  std::vector<Observation> one;
  one.push_back(std::move(o));
  return Finish(one, std::move(result->tuned), false);
}

// The store's cuBLASLt choices for these problems, each problem's once per
// run, marked retune: the first runner tunes again with it among the
// contenders, and the winner replaces it (a choice that once lost to noise
// does not stay for good).
std::vector<v1::LtAlgo> JobRun::StoredLtAlgos(const std::vector<int>& problems) {
  std::vector<v1::LtAlgo> out;
  const std::optional<v1::RunnerInfo> device = options_.evaluator->device();
  if (!device || !ledger_.keyed()) return out;
  const std::string version = CublasVersion(*device);
  for (int p : problems) {
    if (!lt_looked_up_.insert(p).second) continue;
    const ProblemView& v = ledger_.view(p);
    absl::StatusOr<std::vector<LtAlgo>> stored = options_.store->GetLtAlgos(v.problem, version);
    if (!stored.ok()) continue;
    for (const LtAlgo& choice : *stored) {  // one per figure it was tuned by
      v1::LtAlgo& a = out.emplace_back();
      *a.mutable_shape() = v.spec.shape;
      a.set_layout(v.spec.layout);
      a.set_algo(choice.algo);
      a.set_cublas_version(version);
      a.set_gpu(device->gpu());
      a.set_figure(choice.figure);
      a.set_retune(true);
    }
  }
  return out;
}

// Persists the round (callbacks), accounts for it in the ledger, checkpoints
// the job and tells the proposers.
absl::Status JobRun::Finish(std::vector<Observation>& round, std::vector<v1::LtAlgo> tuned,
                            bool checkpoint) {
  if (absl::Status st = Persist(round, std::move(tuned), {}); !st.ok()) return st;
  const std::optional<v1::RunnerInfo> device = options_.evaluator->device();
  const std::string& keyed_on = ledger_.view(0).problem.gpu();
  if (ledger_.keyed() && device && device->gpu() != keyed_on) {
    return absl::UnavailableError(absl::StrCat("job ", job_id_, " was measured on ", keyed_on,
                                               "; this evaluator measures on ", device->gpu()));
  }
  for (const Observation& o : round) {
    ProposerUsage& u = usage_[ProposerIndex(o)];
    if (ledger_.keyed()) {
      for (size_t j = 0; j < o.measurements.size(); ++j) {
        u.improvements += ledger_.Record(o.measured_on[j], o.proposal.candidate.id(), o.measurements[j]);
      }
    }
    u.built += o.build.has_value();
    u.build_failures += o.outcome == Outcome::kBuildFailed;
    u.measurements += static_cast<int>(o.measurements.size());
  }
  if (!ledger_.keyed() && device) {
    if (absl::Status st = SetKeys(*device); !st.ok()) return st;  // its history has this round
  }
  if (checkpoint) {
    if (absl::Status st = Checkpoint(); !st.ok()) return st;
  }
  Release(round);
  return ObserveAll(round);
}

// Forgets a round's in-flight bookkeeping (picked, not yet observed).
void JobRun::Release(const std::vector<Observation>& round) {
  for (const Observation& o : round) scheduler_.Release(ProposerIndex(o), o.proposal);
}

}  // namespace anvil
