// Result::Describe and signal names.
#include <string.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sandbox/internal.h"

namespace anvil::sandbox {
namespace internal {

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev != nullptr ? absl::StrCat("SIG", abbrev) : absl::StrCat("signal ", sig);
}

}  // namespace internal

std::string Result::Describe() const {
  std::string line;
  if (cancelled) {
    line = absl::StrFormat("cancelled after %.3g s (its work was no longer wanted)", wall_seconds);
  } else if (timed_out) {
    line = absl::StrFormat("timed out after %.3g s (limit %.3g s)", wall_seconds, time_limit_seconds);
  } else if (output_capped) {
    line = absl::StrFormat("killed after %.3g s for writing more than its output cap", wall_seconds);
  } else if (term_signal != 0) {
    line = absl::StrFormat("killed by %s after %.3g s", internal::SignalName(term_signal),
                           wall_seconds);
  } else {
    line = absl::StrFormat("exit %d in %.3g s", exit_code, wall_seconds);
  }
  if (oom_killed) absl::StrAppend(&line, ", out of memory (cgroup memory.max)");
  if (stdout_truncated) absl::StrAppend(&line, ", stdout truncated");
  if (stderr_truncated) absl::StrAppend(&line, ", stderr truncated");
  return line;
}

}  // namespace anvil::sandbox
