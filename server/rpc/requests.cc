#include "server/rpc/requests.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "proto/problem.h"
#include "reward/reward.h"

namespace anvil::rpc {
namespace {

bool PrintableAscii(const std::string& s) {
  for (char c : s) {
    if (c < 0x21 || c > 0x7e) return false;
  }
  return true;
}

absl::Status ValidateBudget(const v1::Budget& b) {
  if (absl::Status st = CheckBudget(b); !st.ok()) return st;
  if (b.target_efficiency() > 1) return absl::InvalidArgumentError("budget: target_efficiency is at most 1");
  return absl::OkStatus();
}

// "embedded", "llm", or both comma-separated, each once (the proto's
// documented forms); the server's factory then checks what it can make.
absl::Status ValidateProposers(const std::string& proposer) {
  if (proposer.empty()) return absl::OkStatus();
  std::vector<std::string> seen;
  for (absl::string_view name : absl::StrSplit(proposer, ',')) {
    if ((name != "embedded" && name != "llm") ||
        std::find(seen.begin(), seen.end(), name) != seen.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "proposer: '", proposer, "' is not embedded, llm, or both comma-separated (each once)"));
    }
    seen.emplace_back(name);
  }
  return absl::OkStatus();
}

absl::Status ValidateRequestProblem(int i, const v1::Problem& p) {
  v1::Problem filled = p;  // dtype may be left unset: f16_f32acc is the only one
  if (filled.dtype() == v1::DTYPE_UNSPECIFIED) filled.set_dtype(v1::DTYPE_F16_F32ACC);
  if (absl::Status st = ValidateProblem(filled); !st.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("problems[", i, "]: ", st.message()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateOptimizeRequest(const v1::OptimizeKernelRequest& r, const ServerOptions& o) {
  if (r.problems().empty() && r.resume_job_id().empty()) {
    return absl::InvalidArgumentError("problems: at least one problem (or resume_job_id) is needed");
  }
  if (r.problems_size() > o.max_problems_per_job) {
    return absl::InvalidArgumentError(absl::StrCat("problems: ", r.problems_size(),
                                                   " problems; this server takes at most ",
                                                   o.max_problems_per_job, " per job"));
  }
  for (int i = 0; i < r.problems_size(); ++i) {
    if (absl::Status st = ValidateRequestProblem(i, r.problems(i)); !st.ok()) return st;
  }
  if (absl::Status st = ValidateProposers(r.proposer()); !st.ok()) return st;
  if (!r.reward_figure().empty() && !IsFigure(r.reward_figure())) {
    return absl::InvalidArgumentError("reward_figure must be device, warm, cold or call");
  }
  if (absl::Status st = ValidateBudget(r.budget()); !st.ok()) return st;
  if (r.request_id().size() > 128 || !PrintableAscii(r.request_id())) {
    return absl::InvalidArgumentError("request_id: at most 128 printable ASCII characters, no spaces");
  }
  if (!r.resume_job_id().empty()) return ValidateJobId(r.resume_job_id());
  return absl::OkStatus();
}

absl::Status ValidateJobId(const std::string& job_id) {
  if (job_id.empty() || job_id.size() > 128 || !PrintableAscii(job_id)) {
    return absl::InvalidArgumentError("job_id: a non-empty id of at most 128 printable ASCII characters");
  }
  return absl::OkStatus();
}

}  // namespace anvil::rpc
