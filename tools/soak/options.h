// anvil-soak's command line: what to run (how many jobs, which mix, how many
// parallel builds) and where (GPU, scratch, tests and seeds folders).
// Pure data and a parser; thread-safe.
#ifndef ANVIL_TOOLS_SOAK_OPTIONS_H_
#define ANVIL_TOOLS_SOAK_OPTIONS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace anvil {

struct SoakOptions {
  int jobs = 1000;               // builds + passing evaluations + hostile jobs
  int build_jobs = 4;            // nvcc processes at once (one runner on the GPU meanwhile)
  double eval_share = 0.2;       // share of jobs that evaluate a passing candidate
  double hostile_share = 0.064;  // share of jobs that run a tests/adversarial or tests/broken file
  int recovery_weight = 3;       // each hang/crash fixture this many times per round of fixtures
  int device = 0;                // CUDA ordinal
  double startup_timeout_s = 4;  // runner start-up limit; a passing job takes well under 1 s
  double problem_timeout_s = 2;  // added per problem: a hang costs startup + problem
  int overhead_reps = 5;         // builds and runs per isolation mode for the overhead; 0 = skip
  double memory_slack_mib = 16;  // device memory a finished job may leave behind
  double memory_settle_s = 5;    // how long memory may take to return after a runner ends
  double max_seconds = 0;        // stop starting jobs after this long, and fail; 0 = no limit
  std::string scratch_parent;    // parent of the soak's own directory; "" = $TMPDIR or /tmp
  std::string tests_dir;         // "" = $ANVIL_TESTS_DIR or the source tree's tests/
  std::string seeds_dir;         // "" = the worker's default seeds folder
  std::string out_file;          // JSON summary, when set
  bool json = false;             // JSON summary on stdout (the table then goes to stderr)
  bool cpu_only = false;         // builds and leak checks only, no GPU needed (CI)
};

struct CommandLine {
  SoakOptions options;
  std::string help;  // non-empty: --help was asked for; print it and exit 0
};

// args[0] is the program name. InvalidArgument names the bad option.
absl::StatusOr<CommandLine> ParseCommandLine(const std::vector<std::string>& args);

}  // namespace anvil

#endif  // ANVIL_TOOLS_SOAK_OPTIONS_H_
