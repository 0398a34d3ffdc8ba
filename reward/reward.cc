#include "reward/reward.h"

#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace anvil {
namespace {

// Failures rank below any correct kernel (log2 speedups of real kernels sit
// in about [-8, 2]); cheating ranks below every honest failure.
double FailurePenalty(v1::Verdict v) {
  switch (v) {
    case v1::VERDICT_REJECTED: return -10;
    case v1::VERDICT_COMPILE_ERROR: return -10;
    case v1::VERDICT_UNSUPPORTED: return -11;
    case v1::VERDICT_INCORRECT: return -12;
    case v1::VERDICT_TIMEOUT: return -12;
    case v1::VERDICT_CRASHED: return -12;
    case v1::VERDICT_CHEAT: return -20;
    default: return -12;
  }
}

std::string Kind(v1::Verdict v) {
  std::string name = v1::Verdict_Name(v);
  return absl::AsciiStrToLower(name.substr(name.find('_') + 1));
}

}  // namespace

absl::StatusOr<RewardValue> ComputeReward(const v1::Measurement& m, const std::string& figure) {
  if (!IsFigure(figure)) {
    return absl::InvalidArgumentError(absl::StrCat("unknown reward figure '", figure, "'"));
  }
  if (m.verdict() != v1::VERDICT_PASSED) return RewardValue{FailurePenalty(m.verdict()), Kind(m.verdict()), 0};
  double ours = FigureUs(m.timings(), figure), base = BestBaselineUs(m, figure);
  // Correct, but with no speed by this figure (a call that cannot be captured
  // in a graph): ranked with the candidates that declined the problem. No
  // baseline by the figure: no speed to compare, so nothing earned or lost.
  if (ours <= 0) return RewardValue{FailurePenalty(v1::VERDICT_UNSUPPORTED), "no_figure", 0};
  if (base <= 0) return RewardValue{0, "no_baseline", 0};
  double speedup = base / ours;
  return RewardValue{std::log2(speedup), "speedup", speedup};
}

RewardValue BuildFailureReward(const v1::Build& build) {
  return {FailurePenalty(build.verdict()), Kind(build.verdict()), 0};
}

}  // namespace anvil
