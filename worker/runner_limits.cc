#include "worker/runner_limits.h"

#include <algorithm>

#include <google/protobuf/util/json_util.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace anvil {

absl::Duration FixedProblemLimit(const RunnerLimits& limits, bool profile) {
  return limits.problem_timeout + (profile ? absl::Seconds(limits.profile_seconds) : absl::ZeroDuration());
}

absl::Duration ProblemTimeLimit(const RunnerLimits& limits, const v1::ProblemStart& start,
                                bool profile, std::string* basis) {
  if (start.reference_call_us() <= 0) {  // no baseline ran: nothing to scale with
    *basis = absl::StrFormat("fixed %.3g s (no baseline to scale with)",
                             absl::ToDoubleSeconds(FixedProblemLimit(limits, profile)));
    return FixedProblemLimit(limits, profile);
  }
  const double per_call_us = start.reference_call_us() + limits.call_overhead_us;
  const double weighted_calls =
      double(std::max<int64_t>(0, start.candidate_calls())) * limits.candidate_slowdown +
      double(std::max<int64_t>(0, start.baseline_calls()));
  const double seconds = absl::ToDoubleSeconds(limits.floor) + std::max(0.0, start.warmup_seconds()) +
                         weighted_calls * per_call_us * 1e-6 + (profile ? limits.profile_seconds : 0);
  *basis = absl::StrFormat(
      "%.3g s floor + %.3g s warm-up + (%d candidate calls x %.3g + %d baseline calls) x "
      "(%.3g us slowest baseline + %.3g us overhead)%s",
      absl::ToDoubleSeconds(limits.floor), start.warmup_seconds(), start.candidate_calls(),
      limits.candidate_slowdown, start.baseline_calls(), start.reference_call_us(),
      limits.call_overhead_us, profile ? absl::StrFormat(" + %.3g s profile", limits.profile_seconds) : "");
  return absl::Seconds(std::min(seconds, absl::ToDoubleSeconds(FixedProblemLimit(limits, profile))));
}

absl::Duration RunnerWatch::Phase(absl::Duration limit, std::string basis, double reference_us) {
  current_s_ = absl::ToDoubleSeconds(limit);
  basis_ = std::move(basis);
  reference_us_ = reference_us;
  return limit;
}

std::optional<absl::Duration> RunnerWatch::OnStdout(absl::string_view chunk) {
  if (current_s_ == 0) Phase(limits_.startup_timeout, "startup", 0);
  std::optional<absl::Duration> left;
  size_t nl;
  while ((nl = chunk.find('\n')) != absl::string_view::npos) {
    absl::StrAppend(&partial_, chunk.substr(0, nl));
    chunk.remove_prefix(nl + 1);
    if (std::optional<absl::Duration> l = OnLine(partial_)) left = l;
    partial_.clear();
  }
  // A runner event is a few KB; anything longer is not one (a flood is cut
  // by the output cap).
  if (partial_.size() + chunk.size() <= size_t(limits_.output_cap_bytes)) absl::StrAppend(&partial_, chunk);
  return left;
}

void RunnerWatch::Resume() {
  Phase(limits_.setup_timeout, absl::StrFormat("set-up (%.3g s)", absl::ToDoubleSeconds(limits_.setup_timeout)), 0);
}

void RunnerWatch::Finish() {
  if (!partial_.empty()) OnLine(partial_);
  partial_.clear();
}

std::optional<absl::Duration> RunnerWatch::OnLine(absl::string_view line) {
  if (line.empty() || line.front() != '{') return std::nullopt;  // device printf and the like
  v1::RunnerEvent e;
  if (!google::protobuf::util::JsonStringToMessage(std::string(line), &e).ok()) return std::nullopt;
  events_.push_back(e);
  if (e.has_batch_end()) batch_ended_ = true;
  const std::string setup = absl::StrFormat("set-up (%.3g s)", absl::ToDoubleSeconds(limits_.setup_timeout));
  if (e.has_info()) return Phase(limits_.setup_timeout, setup, 0);
  if (e.has_problem_start()) {
    std::string basis;
    const absl::Duration limit = ProblemTimeLimit(limits_, e.problem_start(), profile_, &basis);
    return Phase(limit, basis, e.problem_start().reference_call_us());
  }
  if (e.has_measurement()) {
    applied_.push_back({current_s_, basis_, reference_us_});
    return Phase(limits_.setup_timeout, setup, 0);
  }
  return std::nullopt;
}

}  // namespace anvil
