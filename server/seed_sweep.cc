#include "server/seed_sweep.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "reward/reward.h"

namespace anvil {
namespace {

struct Best {
  v1::Candidate candidate;
  v1::Build build;
  v1::Measurement measurement;
  int64_t id = 0;
};

bool Measured(Store& store, const v1::Problem& p, const std::string& candidate_id) {
  absl::StatusOr<std::vector<StoredMeasurement>> h = store.SearchHistory(p);
  if (!h.ok()) return false;
  for (const StoredMeasurement& m : *h) {
    if (m.measurement.candidate_id() == candidate_id) return true;
  }
  return false;
}

std::string Line(const v1::Candidate& c, const v1::Measurement& m) {
  if (m.verdict() != v1::VERDICT_PASSED) {
    return absl::StrCat(ShapeName(m.problem().shape()), " ", LayoutName(m.problem().layout()), "  ",
                        c.name(), "  ", v1::Verdict_Name(m.verdict()), " ", m.reason());
  }
  double base = BestBaselineUs(m, "device"), us = m.timings().device().median_us();
  return absl::StrFormat("%s %s  %s  device %.2f us, best baseline %.2f us, %.3fx",
                         ShapeName(m.problem().shape()), LayoutName(m.problem().layout()), c.name(),
                         us, base, us > 0 ? base / us : 0.0);
}

// Re-measures the winner on fresh inputs in a new runner; promotes on PASSED.
absl::Status Verify(Best& best, LocalWorker& worker, Store& store, const std::string& job_id) {
  absl::StatusOr<CandidateOutcome> again =
      worker.Measure(best.candidate, best.build, {best.measurement.problem().shape()}, &store, job_id);
  if (!again.ok()) return again.status();
  if (again->measurements.empty() || again->measurements[0].verdict() != v1::VERDICT_PASSED) {
    return absl::OkStatus();  // not promoted; the failure is stored
  }
  return store.MarkVerified(best.id);
}

}  // namespace

absl::StatusOr<SweepResult> RunSeedSweep(const std::vector<SeedFamily>& seeds,
                                         const std::vector<ShapeSpec>& problems,
                                         const std::string& job_id, LocalWorker& worker,
                                         Store& store, const ProgressFn& progress) {
  SweepResult result;
  std::map<std::string, Best> best;  // by problem name
  for (v1::Layout layout : {v1::LAYOUT_NT, v1::LAYOUT_NN}) {
    std::vector<v1::Shape> shapes;
    for (const ShapeSpec& s : problems) {
      if (s.layout == layout) shapes.push_back(s.shape);
    }
    if (shapes.empty()) continue;
    std::vector<v1::Candidate> candidates;
    for (const SeedFamily& f : seeds) {
      for (v1::Layout l : f.layouts) {
        if (l == layout) candidates.push_back(MakeSeedCandidate(f, layout));
      }
    }
    std::vector<absl::StatusOr<v1::Build>> builds = worker.BuildAll(candidates);
    for (size_t i = 0; i < candidates.size(); ++i) {
      if (!builds[i].ok()) return builds[i].status();
      ++result.candidates_built;
      progress(absl::StrCat("built ", candidates[i].name(), ": ", v1::Verdict_Name(builds[i]->verdict()),
                            builds[i]->cache_hit() ? " (cached)" : "",
                            builds[i]->error().empty() ? "" : "\n" + builds[i]->error()));
      std::vector<v1::Shape> todo;
      for (const v1::Shape& s : shapes) {
        v1::Problem p = MakeProblem(worker.runner_info() ? worker.runner_info()->gpu() : "", "", s, layout);
        if (!worker.runner_info() || !Measured(store, p, candidates[i].id())) todo.push_back(s);
      }
      absl::StatusOr<CandidateOutcome> out =
          worker.Measure(candidates[i], *builds[i], todo, &store, job_id);
      if (!out.ok()) return out.status();
      for (size_t j = 0; j < out->measurements.size(); ++j) {
        const v1::Measurement& m = out->measurements[j];
        ++result.measurements;
        progress(Line(candidates[i], m));
        std::string key = ProblemName(m.problem());
        if (m.verdict() != v1::VERDICT_PASSED) continue;
        auto it = best.find(key);
        if (it == best.end() || m.timings().device().median_us() <
                                    it->second.measurement.timings().device().median_us()) {
          best[key] = {candidates[i], *builds[i], m, out->measurement_ids[j]};
        }
      }
    }
  }
  for (auto& [key, b] : best) {
    if (absl::Status st = Verify(b, worker, store, job_id); !st.ok()) return st;
    v1::ProblemProgress p;
    *p.mutable_problem() = b.measurement.problem();
    p.set_best_candidate_id(b.candidate.id());
    p.set_best_us(b.measurement.timings().device().median_us());
    p.set_best_baseline_us(BestBaselineUs(b.measurement, "device"));
    p.set_speedup(p.best_us() > 0 ? p.best_baseline_us() / p.best_us() : 0);
    (void)store.UpdateJobProblem(job_id, p);
    result.problems.push_back(p);
  }
  return result;
}

}  // namespace anvil
