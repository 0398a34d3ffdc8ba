// PerShapeEvaluator: the one base of the CandidateEvaluator test doubles, for
// whole jobs on the CPU. A subclass says what one build and one measurement
// of a candidate on one shape give; this base answers the batches the way
// the interface's contract says (results[i] answers requests[i], a
// measurement per shape with the candidate's id and the fidelity asked for,
// each build handed to WorkContext::built as it ends, Cancelled for work
// asked after the context is cancelled; tests/evaluator_contract_test.cc),
// keeps how many requests each Measure call carried, and reports a fake H100
// ("FAKE-H100", sm_90a, 132 SMs) unless told otherwise. `slots` and
// `waiting` are what it answers to MeasureSlots and WaitingSlots (a local
// GPU: 2 and 1); its Measure calls run one at a time, as on one GPU, each
// taking `measure_delay` of real time.
// Thread-safe for Measure; Build from one thread at a time.
#ifndef ANVIL_TESTS_PER_SHAPE_EVALUATOR_H_
#define ANVIL_TESTS_PER_SHAPE_EVALUATOR_H_

#include <algorithm>
#include <chrono>
#include <mutex>
#include <optional>
#include <thread>
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
    std::lock_guard<std::mutex> gpu(measure_mu_);
    std::this_thread::sleep_for(measure_delay);
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
      // A second a shape, or the call's delay shared out by shapes.
      res.gpu_seconds = measure_delay.count() > 0
                            ? 1e-3 * double(measure_delay.count()) * double(r.shapes.size()) / double(Shapes(rs))
                            : double(r.shapes.size());
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

  int MeasureSlots() const override { return slots; }
  int WaitingSlots() const override { return waiting; }

  std::vector<std::vector<MeasureRequest>> measure_calls;  // every Measure call's requests
  int slots = 1;
  int waiting = 0;
  std::chrono::milliseconds measure_delay{0};  // each Measure call's, as a GPU's time

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

 private:
  static size_t Shapes(const std::vector<MeasureRequest>& rs) {
    size_t n = 0;
    for (const MeasureRequest& r : rs) n += r.shapes.size();
    return std::max<size_t>(n, 1);
  }
  std::mutex measure_mu_;
};

}  // namespace anvil::testing

#endif  // ANVIL_TESTS_PER_SHAPE_EVALUATOR_H_
