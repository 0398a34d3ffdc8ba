#include "server/problem_ledger.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "proto/figures.h"
#include "proto/problem.h"

namespace anvil {

ProblemLedger::ProblemLedger(const v1::OptimizeKernelRequest& request, double plateau_gain, DoneFn done)
    : figure_(request.reward_figure()), budget_(request.budget()), plateau_gain_(plateau_gain),
      done_(std::move(done)) {
  for (const v1::Problem& p : request.problems()) {
    ProblemView v;
    v.spec = {p.shape(), p.layout()};
    v.problem = p;
    v.name = absl::StrCat(ShapeName(p.shape()), " ", LayoutName(p.layout()));
    views_.push_back(std::move(v));
  }
  state_.resize(views_.size());
}

absl::Status ProblemLedger::SetKeys(const v1::RunnerInfo& device, Store& store, const std::string& job_id) {
  for (ProblemView& v : views_) {
    if (!v.problem.gpu().empty() && v.problem.gpu() != device.gpu()) {
      return absl::UnavailableError(absl::StrCat("problem ", v.name, " asks for GPU ", v.problem.gpu(),
                                                 " but this evaluator measures on ", device.gpu()));
    }
    v.problem = MakeProblem(device.gpu(), device.arch(), v.spec.shape, v.spec.layout);
  }
  keyed_ = true;
  return Load(store, job_id);
}

// What the store holds on these problems: every job's measured pairs (not
// measured again), this job's tries, bests and plateau counters.
absl::Status ProblemLedger::Load(Store& store, const std::string& job_id) {
  for (int p = 0; p < size(); ++p) {
    absl::StatusOr<std::vector<StoredMeasurement>> h = store.SearchHistory(views_[p].problem);
    if (!h.ok()) return h.status();
    ProblemView& v = views_[p];
    v.tried = v.tried_this_job = 0;
    v.best_us = v.best_baseline_us = 0;
    state_[p] = State{};
    for (const StoredMeasurement& m : *h) {
      // A row measured before the job's figure existed (a store from before
      // graph-replay timing) leaves its pair to be measured again.
      const v1::Measurement& x = m.measurement;
      if (!PredatesFigure(x, figure_)) state_[p].measured.insert(x.candidate_id());
      ++v.tried;
      if (m.job_id == job_id) Take(p, x, x.verified());
    }
    UpdateStatus(p);
  }
  return absl::OkStatus();
}

bool ProblemLedger::Take(int p, const v1::Measurement& m, bool verified) {
  ProblemView& v = views_[p];
  State& s = state_[p];
  const bool fresh = s.tried.insert(m.candidate_id()).second;  // a re-check is no new try
  v.tried_this_job = static_cast<int>(s.tried.size());
  const double us = RankingUs(m, figure_);
  const bool gain = Beats(us, v.best_us > 0 ? v.best_us * (1 - plateau_gain_) : 0);
  if (fresh) s.since_gain = gain ? 0 : s.since_gain + 1;
  if (!verified && !m.gpu_uuid().empty()) s.measured_by[m.candidate_id()].insert(m.gpu_uuid());
  const bool best = Beats(us, v.best_us);
  if (best) {
    v.best_us = us;
    v.best_baseline_us = BestBaselineUs(m, figure_);
    s.best_id = m.candidate_id();
  }
  if (verified && Beats(us, s.verified_us)) {
    s.verified_id = m.candidate_id();
    s.verified_us = us;
    s.verified_baseline_us = BestBaselineUs(m, figure_);
  }
  const double target = budget_.target_efficiency();
  if (target > 0 && m.verdict() == v1::VERDICT_PASSED && m.efficiency() >= target && s.status.empty()) {
    s.status = "target";
  }
  return best;
}

bool ProblemLedger::Record(int p, const std::string& candidate_id, const v1::Measurement& m) {
  const std::string before = state_[p].best_id;
  views_[p].tried += state_[p].measured.insert(candidate_id).second;
  Take(p, m, m.verified());
  UpdateStatus(p);
  return state_[p].best_id != before;
}

void ProblemLedger::UpdateStatus(int p) {
  ProblemView& v = views_[p];
  State& s = state_[p];
  if (s.status.empty() && budget_.max_candidates() > 0 && v.tried_this_job >= budget_.max_candidates()) {
    s.status = "candidates";
  }
  if (s.status.empty() && budget_.plateau_candidates() > 0 && s.since_gain >= budget_.plateau_candidates()) {
    s.status = "plateau";
  }
  if (!s.status.empty() && v.active) {
    v.active = false;
    if (done_) {
      done_(p, absl::StrFormat("%-22s done (%s): %d candidates in this job", v.name, s.status,
                               v.tried_this_job));
    }
  }
}

bool ProblemLedger::AnyActive() const {
  return std::any_of(views_.begin(), views_.end(), [](const ProblemView& v) { return v.active; });
}

bool ProblemLedger::Measured(int p, const std::string& candidate_id) const {
  return state_[p].measured.count(candidate_id) > 0;
}

std::vector<std::string> ProblemLedger::MeasuredBy(int p, const std::string& candidate_id) const {
  const auto& by = state_[p].measured_by;
  auto it = by.find(candidate_id);
  return it == by.end() ? std::vector<std::string>() : std::vector<std::string>(it->second.begin(), it->second.end());
}

v1::ProblemProgress ProblemLedger::Progress(int p) const {
  const ProblemView& v = views_[p];
  const State& s = state_[p];
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

}  // namespace anvil
