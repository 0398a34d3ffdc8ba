#include "tools/soak/options.h"

#include <CLI/CLI.hpp>

#include "absl/strings/str_cat.h"

namespace anvil {

absl::StatusOr<CommandLine> ParseCommandLine(const std::vector<std::string>& args) {
  CommandLine cl;
  SoakOptions& o = cl.options;
  CLI::App app{
      "anvil-soak: N jobs on one GPU node -- sandboxed nvcc builds in parallel with "
      "evaluations (one runner on the GPU at a time), passing candidates mixed with the "
      "hostile and broken ones of tests/ -- checking every verdict, timing recovery after "
      "hangs and crashes, and looking for leaked processes, scratch directories, descriptors "
      "and device memory. Exit 0: all as expected; 1: something was not; 2: could not run; "
      "77: no GPU.",
      "anvil-soak"};
  app.add_option("--jobs", o.jobs, "jobs in all")->check(CLI::Range(1, 1000000));
  app.add_option("--build-jobs", o.build_jobs, "nvcc builds at once")->check(CLI::Range(1, 256));
  app.add_option("--eval-share", o.eval_share, "share of jobs evaluating a passing candidate")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--hostile-share", o.hostile_share, "share of jobs running a hostile or broken candidate")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--recovery-weight", o.recovery_weight,
                 "copies of each hang/crash candidate per round of hostile ones")
      ->check(CLI::Range(1, 100));
  app.add_option("--device", o.device, "CUDA device ordinal")->check(CLI::NonNegativeNumber);
  app.add_option("--startup-timeout", o.startup_timeout_s, "runner start-up limit (s)")
      ->check(CLI::Range(0.5, 600.0));
  app.add_option("--problem-timeout", o.problem_timeout_s, "limit per problem (s)")
      ->check(CLI::Range(0.5, 600.0));
  app.add_option("--overhead-reps", o.overhead_reps,
                 "builds and runs per isolation mode for the sandbox overhead (0: skip)")
      ->check(CLI::Range(0, 100));
  app.add_option("--memory-slack-mib", o.memory_slack_mib, "device memory a finished job may leave (MiB)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--memory-settle", o.memory_settle_s, "time device memory may take to return (s)")
      ->check(CLI::Range(0.0, 120.0));
  app.add_option("--max-seconds", o.max_seconds, "stop starting jobs after this long and fail (0: no limit)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--scratch", o.scratch_parent, "parent of the soak's scratch directory");
  app.add_option("--tests-dir", o.tests_dir, "folder holding adversarial/ and broken/");
  app.add_option("--seeds-dir", o.seeds_dir, "folder holding 01_naive/");
  app.add_option("--out", o.out_file, "write the JSON summary here");
  app.add_flag("--json", o.json, "print the JSON summary on stdout (the table on stderr)");
  app.add_flag("--cpu-only", o.cpu_only,
               "only builds (all jobs) and the leak checks: no GPU needed, for CI");

  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::CallForHelp&) {
    cl.help = app.help();
    return cl;
  } catch (const CLI::ParseError& e) {
    return absl::InvalidArgumentError(e.what());
  }
  if (o.eval_share + o.hostile_share > 1.0) {
    return absl::InvalidArgumentError(absl::StrCat("--eval-share + --hostile-share is ",
                                                   o.eval_share + o.hostile_share, ", over 1"));
  }
  return cl;
}

}  // namespace anvil
