// PerShapeEvaluator: the one base of the CandidateEvaluator test doubles, for
// whole jobs on the CPU. A subclass says what one build and one measurement
// of a candidate on one shape give; this base answers the batches the way
// the interface's contract says (results[i] answers requests[i], a
// measurement per shape with the candidate's id and the fidelity asked for,
// each build handed to WorkContext::built as it ends, Cancelled for work
// asked after the context is cancelled; tests/evaluator_contract_test.cc),
// keeps how many requests each Measure call carried, and reports a fake H100
// ("FAKE-H100", sm_90a, 132 SMs) unless told otherwise.
// Not thread-safe; a job calls it from one thread.
#ifndef ANVIL_TESTS_PER_SHAPE_EVALUATOR_H_
#define ANVIL_TESTS_PER_SHAPE_EVALUATOR_H_

#include <optional>
#include <vector>

#include "worker/candidate_evaluator.h"

namespace anvil::testing {

class PerShapeEvaluator : public CandidateEvaluator {
 public:
  std::vector<absl::StatusOr<v1::Build>> Build(const std::vector<v1::Candidate>& cs,
                                               const WorkContext& context = {}) override {
    std::vector<absl::StatusOr<v1::Build>> out;
    for (const v1::Candidate& c : cs) {
      if (context.Cancelled()) {
        out.push_back(absl::CancelledError("the work was cancelled"));
        continue;
      }
      v1::Build b = BuildOne(c);
      b.set_candidate_id(c.id());
      if (context.built) context.built(out.size(), b);
      out.push_back(std::move(b));
    }
    return out;
  }
  std::vector<absl::StatusOr<MeasureResult>> Measure(const std::vector<MeasureRequest>& rs,
                                                     const WorkContext& context = {}) override {
    std::vector<absl::StatusOr<MeasureResult>> out;
    measure_calls.push_back(rs);
    for (const MeasureRequest& r : rs) {
      if (context.Cancelled()) {
        out.push_back(absl::CancelledError("the work was cancelled"));
        continue;
      }
      if (absl::Status st = Admit(r); !st.ok()) {
        out.push_back(st);
        continue;
      }
      MeasureResult res;
      for (const v1::Shape& s : r.shapes) {
        v1::Measurement m = MeasureShape(r, s);
        m.set_candidate_id(r.candidate.id());
        const bool screen = r.fidelity == v1::FIDELITY_SCREEN && !r.recheck;
        m.set_fidelity(screen ? v1::FIDELITY_SCREEN : v1::FIDELITY_FULL);
        res.measurements.push_back(std::move(m));
      }
      res.gpu_seconds = double(r.shapes.size());
      out.push_back(std::move(res));
    }
    return out;
  }
  std::optional<v1::RunnerInfo> device() const override {
    v1::RunnerInfo info;
    info.set_gpu("FAKE-H100");
    info.set_arch("sm_90a");
    info.set_sm_count(132);
    return info;
  }

  std::vector<std::vector<MeasureRequest>> measure_calls;  // every Measure call's requests

 protected:
  virtual v1::Build BuildOne(const v1::Candidate& c) = 0;
  virtual v1::Measurement MeasureOne(const v1::Candidate& c, const v1::Shape& s) = 0;
  // The measurement of one shape of a request (default: MeasureOne), for
  // doubles that look at the whole request (a re-check, say).
  virtual v1::Measurement MeasureShape(const MeasureRequest& r, const v1::Shape& s) {
    return MeasureOne(r.candidate, s);
  }
  // Anvil's own failure for a whole request (the worker is gone): not OK
  // answers the request with it.
  virtual absl::Status Admit(const MeasureRequest&) { return absl::OkStatus(); }
};

}  // namespace anvil::testing

#endif  // ANVIL_TESTS_PER_SHAPE_EVALUATOR_H_
