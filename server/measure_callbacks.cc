#include "server/measure_callbacks.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "proto/figures.h"
#include "proto/problem.h"
#include "reward/reward.h"

namespace anvil {
namespace {

class StoreCallback : public MeasureCallback {
 public:
  explicit StoreCallback(Store& store) : store_(store) {}

  absl::Status Apply(MeasuredRound& round) override {
    for (Observation& o : *round.observations) {
      if (!o.build) continue;  // skipped before it was built: nothing to store
      if (absl::Status st = store_.PutCandidate(o.proposal.candidate); !st.ok()) return st;
      if (absl::StatusOr<int64_t> id = store_.PutBuild(*o.build); !id.ok()) return id.status();
      if (o.measurements.empty()) continue;
      absl::StatusOr<std::vector<int64_t>> ids = store_.PutMeasurements(o.measurements, round.job_id);
      if (!ids.ok()) return ids.status();
      o.measurement_ids = *ids;
      if (o.proposal.recheck) {
        if (absl::Status st = MarkPassedVerified(o); !st.ok()) return st;
      }
    }
    return PutTuned(round);
  }

 private:
  // A passed re-check is what promotes a best: marked verified, unless its
  // figure is disputed.
  absl::Status MarkPassedVerified(Observation& o) {
    for (size_t j = 0; j < o.measurements.size(); ++j) {
      if (o.measurements[j].verdict() != v1::VERDICT_PASSED) continue;
      if (j < o.disputes.size() && !o.disputes[j].empty()) continue;
      if (absl::Status st = store_.MarkVerified(o.measurement_ids[j]); !st.ok()) return st;
      o.measurements[j].set_verified(true);
    }
    return absl::OkStatus();
  }

  absl::Status PutTuned(const MeasuredRound& round) {
    for (const v1::LtAlgo& a : round.tuned) {
      std::string arch;
      for (const ProblemView& p : *round.problems) {
        if (p.problem.gpu() == a.gpu()) arch = p.problem.arch();
      }
      if (arch.empty()) continue;  // not a GPU of this job
      const v1::Problem p = MakeProblem(a.gpu(), arch, a.shape(), a.layout());
      const LtAlgo choice{a.algo(), 0, a.figure().empty() ? "device" : a.figure()};
      if (absl::Status st = store_.PutLtAlgo(p, a.cublas_version(), choice); !st.ok()) {
        return st;
      }
    }
    return absl::OkStatus();
  }

  Store& store_;
};

class CrossCheckCallback : public MeasureCallback {
 public:
  CrossCheckCallback(Store& store, double tolerance, int quarantine_after)
      : store_(store), tolerance_(tolerance), quarantine_after_(quarantine_after) {}

  absl::Status Apply(MeasuredRound& round) override {
    for (Observation& o : *round.observations) {
      if (!o.proposal.recheck) continue;
      o.disputes.assign(o.measurements.size(), "");
      for (size_t j = 0; j < o.measurements.size(); ++j) {
        absl::StatusOr<std::string> why = Check(round, o.measurements[j]);
        if (!why.ok()) return why.status();
        o.disputes[j] = *why;
      }
    }
    return absl::OkStatus();
  }

 private:
  // Why `m`, a re-check, is not believed ("" when it is).
  absl::StatusOr<std::string> Check(const MeasuredRound& round, const v1::Measurement& m) {
    const double us = FigureUs(m.timings(), round.figure);
    if (m.verdict() != v1::VERDICT_PASSED || m.worker().empty() || us <= 0) return std::string();
    absl::StatusOr<std::vector<StoredMeasurement>> history = store_.SearchHistory(m.problem(), round.job_id);
    if (!history.ok()) return history.status();
    int agree = 0;
    std::string disagree;
    for (const StoredMeasurement& h : *history) {
      const v1::Measurement& x = h.measurement;
      const double them = FigureUs(x.timings(), round.figure);
      if (x.candidate_id() != m.candidate_id() || x.verdict() != v1::VERDICT_PASSED || them <= 0 ||
          x.worker().empty() || x.gpu_uuid() == m.gpu_uuid()) {
        continue;  // not the same candidate measured by another GPU
      }
      if (std::max(us, them) / std::min(us, them) - 1 <= tolerance_) {
        ++agree;
        continue;
      }
      const std::string detail = absl::StrFormat(
          "%s on %s (%s): %.3g us on worker %s, %.3g us on worker %s (a re-check), off by more than %.0f%%",
          m.candidate_id().substr(0, 12), ProblemName(m.problem()), round.figure, them, x.worker(), us, m.worker(),
          100 * tolerance_);
      if (disagree.empty()) disagree = detail;
      for (const auto& [who, other] : {std::pair{x.worker(), m.worker()}, std::pair{m.worker(), x.worker()}}) {
        WorkerEvidence e{who, "disagreement", "", m.candidate_id(), ProblemName(m.problem()), other, detail};
        absl::StatusOr<WorkerRecord> w = store_.RecordEvidence(e, quarantine_after_);
        if (!w.ok() && !absl::IsNotFound(w.status())) return w.status();
      }
    }
    return agree > 0 ? std::string() : disagree;
  }

  Store& store_;
  const double tolerance_;
  const int quarantine_after_;
};

class RewardCallback : public MeasureCallback {
 public:
  explicit RewardCallback(Store& store) : store_(store) {}

  absl::Status Apply(MeasuredRound& round) override {
    for (Observation& o : *round.observations) {
      o.rewards.clear();
      o.reward_kinds.clear();
      if (o.outcome == Outcome::kBuildFailed && o.build) {
        const RewardValue r = BuildFailureReward(*o.build);
        o.rewards.push_back(r.value);
        o.reward_kinds.push_back(r.kind);
        if (absl::Status st = Put(round, o, r, 0, nullptr); !st.ok()) return st;  // no measurement
        continue;
      }
      for (size_t j = 0; j < o.measurements.size(); ++j) {
        absl::StatusOr<RewardValue> r = ComputeReward(o.measurements[j], round.figure);
        if (!r.ok()) return r.status();
        o.rewards.push_back(r->value);
        o.reward_kinds.push_back(r->kind);
        const int64_t id = j < o.measurement_ids.size() ? o.measurement_ids[j] : 0;
        if (absl::Status st = Put(round, o, *r, id, &o.measurements[j]); !st.ok()) return st;
      }
    }
    return absl::OkStatus();
  }

 private:
  absl::Status Put(const MeasuredRound& round, const Observation& o, const RewardValue& r,
                   int64_t measurement_id, const v1::Measurement* m) {
    Reward rec;
    rec.measurement_id = measurement_id;
    rec.candidate_id = o.proposal.candidate.id();
    if (m != nullptr) rec.problem = m->problem();
    rec.job_id = round.job_id;
    rec.value = r.value;
    rec.kind = r.kind;
    rec.figure = round.figure;
    rec.details_json = absl::StrFormat(R"({"proposer":"%s","stage":"%s","fidelity":"%s"})",
                                       o.proposal.candidate.proposer(), o.proposal.stage,
                                       m == nullptr ? "" : FidelityName(m->fidelity()));
    return store_.PutReward(rec).status();
  }

  Store& store_;
};

class ExchangeCallback : public MeasureCallback {
 public:
  explicit ExchangeCallback(Store& store) : store_(store) {}

  absl::Status Apply(MeasuredRound& round) override {
    for (const ProposerRecord& r : round.records) {
      if (r.exchange.has_value()) {
        absl::StatusOr<int64_t> id = store_.PutLlmExchange(*r.exchange);
        if (!id.ok()) return id.status();
        ids_[r.exchange_key] = *id;
        continue;
      }
      auto it = ids_.find(r.exchange_key);
      if (it == ids_.end()) continue;  // its exchange was not kept
      if (absl::Status st = store_.SetLlmSampleOutcome(it->second, r.sample_index, r.outcome); !st.ok()) {
        return st;
      }
    }
    return absl::OkStatus();
  }

 private:
  Store& store_;
  std::map<int64_t, int64_t> ids_;  // exchange key -> store id
};

class ProgressCallback : public MeasureCallback {
 public:
  explicit ProgressCallback(std::function<void(JobEvent)> emit) : emit_(std::move(emit)) {}

  absl::Status Apply(MeasuredRound& round) override {
    for (const Observation& o : *round.observations) {
      if (o.outcome == Outcome::kBuildFailed && o.build) {
        JobEvent e = Event(JobEventKind::kBuildFailed, o, -1);
        e.message = absl::StrCat(o.proposal.candidate.name(), " did not build: ",
                                 v1::Verdict_Name(o.build->verdict()), " ",
                                 o.build->error().substr(0, 300));
        emit_(std::move(e));
      }
      for (size_t j = 0; j < o.measurements.size() && j < o.measured_on.size(); ++j) {
        Measured(round, o, j);
      }
    }
    return absl::OkStatus();
  }

 private:
  static JobEvent Event(JobEventKind kind, const Observation& o, int problem) {
    JobEvent e;
    e.kind = kind;
    e.proposer = o.proposal.candidate.proposer();
    e.stage = o.proposal.stage;
    e.problem = problem;
    return e;
  }

  void Measured(const MeasuredRound& round, const Observation& o, size_t j) {
    const v1::Measurement& m = o.measurements[j];
    const ProblemView& p = (*round.problems)[o.measured_on[j]];
    JobEvent e = Event(JobEventKind::kMeasured, o, o.measured_on[j]);
    e.measurement = m;
    const double us = FigureUs(m.timings(), round.figure);
    e.message = absl::StrFormat("[%s] %-22s %s %s%s", o.proposal.stage, p.name,
                                o.proposal.candidate.name(), v1::Verdict_Name(m.verdict()),
                                m.verdict() == v1::VERDICT_PASSED ? absl::StrFormat(" %.2f us", us)
                                                                  : absl::StrCat(" ", m.reason()));
    emit_(e);
    if (m.verdict() != v1::VERDICT_PASSED || us <= 0 || (p.best_us > 0 && us >= p.best_us)) return;
    e.kind = JobEventKind::kNewBest;
    const double base = BestBaselineUs(m, round.figure);
    e.message = absl::StrFormat("[%s] %-22s new best %s: %.2f us, %.3fx the best baseline (%.2f us)",
                                o.proposal.stage, p.name, o.proposal.candidate.name(), us,
                                base / us, base);
    emit_(std::move(e));
  }

  std::function<void(JobEvent)> emit_;
};

}  // namespace

std::unique_ptr<MeasureCallback> MakeCrossCheckCallback(Store& store, double tolerance, int quarantine_after) {
  return std::make_unique<CrossCheckCallback>(store, tolerance, quarantine_after);
}
std::unique_ptr<MeasureCallback> MakeStoreCallback(Store& store) {
  return std::make_unique<StoreCallback>(store);
}
std::unique_ptr<MeasureCallback> MakeExchangeCallback(Store& store) {
  return std::make_unique<ExchangeCallback>(store);
}
std::unique_ptr<MeasureCallback> MakeRewardCallback(Store& store) {
  return std::make_unique<RewardCallback>(store);
}
std::unique_ptr<MeasureCallback> MakeProgressCallback(std::function<void(JobEvent)> emit) {
  return std::make_unique<ProgressCallback>(std::move(emit));
}

const char* JobEventKindName(JobEventKind kind) {
  switch (kind) {
    case JobEventKind::kState: return "state";
    case JobEventKind::kMeasured: return "measured";
    case JobEventKind::kBuildFailed: return "build_failed";
    case JobEventKind::kNewBest: return "new_best";
    case JobEventKind::kProblemDone: return "problem_done";
    case JobEventKind::kLog: return "log";
  }
  return "log";
}

}  // namespace anvil
