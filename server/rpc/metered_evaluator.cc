#include "server/rpc/metered_evaluator.h"

#include <cctype>

namespace anvil::rpc {
namespace {

std::string VerdictLabel(v1::Verdict v) {
  std::string name = v1::Verdict_Name(v).substr(std::string("VERDICT_").size());
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name;
}

}  // namespace

std::vector<absl::StatusOr<v1::Build>> MeteredEvaluator::Build(
    const std::vector<v1::Candidate>& candidates, const WorkContext& context) {
  std::vector<absl::StatusOr<v1::Build>> builds = inner_->Build(candidates, context);
  for (const absl::StatusOr<v1::Build>& b : builds) {
    if (b.ok()) metrics_.CandidateBuilt(b->verdict() == v1::VERDICT_PASSED, b->seconds());
  }
  return builds;
}

std::vector<absl::StatusOr<MeasureResult>> MeteredEvaluator::Measure(
    const std::vector<MeasureRequest>& requests, const WorkContext& context) {
  std::vector<absl::StatusOr<MeasureResult>> results = inner_->Measure(requests, context);
  for (const absl::StatusOr<MeasureResult>& r : results) {
    if (!r.ok()) continue;
    for (const v1::Measurement& m : r->measurements) {
      metrics_.CandidateMeasured(VerdictLabel(m.verdict()), m.seconds());
    }
  }
  return results;
}

}  // namespace anvil::rpc
