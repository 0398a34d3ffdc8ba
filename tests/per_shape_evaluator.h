// PerShapeEvaluator: a CandidateEvaluator test double for whole jobs on the
// CPU. A subclass says what one build and one measurement of a candidate on
// one shape give; this base answers the batches (results[i] answers
// requests[i]) and reports a fake H100
// ("FAKE-H100", sm_90a, 132 SMs). Not thread-safe; a job calls it from one
// thread.
#ifndef ANVIL_TESTS_PER_SHAPE_EVALUATOR_H_
#define ANVIL_TESTS_PER_SHAPE_EVALUATOR_H_

#include <optional>
#include <vector>

#include "server/evaluator.h"

namespace anvil::testing {

class PerShapeEvaluator : public CandidateEvaluator {
 public:
  std::vector<absl::StatusOr<v1::Build>> Build(const std::vector<v1::Candidate>& cs, const WorkContext&) override {
    std::vector<absl::StatusOr<v1::Build>> out;
    for (const v1::Candidate& c : cs) {
      v1::Build b = BuildOne(c);
      b.set_candidate_id(c.id());
      out.push_back(std::move(b));
    }
    return out;
  }
  std::vector<absl::StatusOr<MeasureResult>> Measure(const std::vector<MeasureRequest>& rs,
                                                     const WorkContext&) override {
    std::vector<absl::StatusOr<MeasureResult>> out;
    for (const MeasureRequest& r : rs) {
      MeasureResult res;
      for (const v1::Shape& s : r.shapes) {
        v1::Measurement m = MeasureOne(r.candidate, s);
        m.set_candidate_id(r.candidate.id());
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

 protected:
  virtual v1::Build BuildOne(const v1::Candidate& c) = 0;
  virtual v1::Measurement MeasureOne(const v1::Candidate& c, const v1::Shape& s) = 0;
};

}  // namespace anvil::testing

#endif  // ANVIL_TESTS_PER_SHAPE_EVALUATOR_H_
