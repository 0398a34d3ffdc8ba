// anvil: the command-line front of Anvil. See README.md for the commands.
#include <cstdlib>
#include <iostream>

#include <CLI/CLI.hpp>

#include "cli/cli.h"

int main(int argc, char** argv) {
  using namespace anvil::cli;
  CLI::App app{"Anvil: searches for HGEMM kernels faster than cuBLAS, one shape at a time"};
  app.require_subcommand(1);
  Globals g;
  if (const char* db = std::getenv("ANVIL_DB")) g.db = db;
  app.add_option("--db", g.db, "SQLite store (default: $ANVIL_DB or ./anvil.db)");
  app.add_flag("--json", g.json, "machine-readable output");
  app.footer("Exit codes: 0 ok, 1 Anvil failed, 2 bad arguments, 3 not possible here "
             "(no GPU / not built yet), 4 database unusable.");

  OptimizeArgs opt;
  CLI::App* optimize = app.add_subcommand("optimize", "search kernels for problems and store the winners");
  optimize->add_option("--shapes", opt.shapes_file, "file of 'M N K layout' lines");
  optimize->add_option("--shape", opt.shapes, "MxNxK (repeatable)");
  optimize->add_option("--layout", opt.layout, "nt (C = A*B^T) or nn (C = A*B) for --shape");
  optimize->add_option("--budget-minutes", opt.budget_minutes,
                       "search time of this run; rerun to resume (default 60)")->check(CLI::Range(0.0, 10080.0));
  optimize->add_option("--build-jobs", opt.build_jobs, "parallel nvcc jobs (default: cores/2)")->check(CLI::Range(1, 256));
  optimize->add_flag("--seeds-only", opt.seeds_only, "measure the seed configurations only");
  optimize->add_option("--curve", opt.curve_file, "write the search curve (best-so-far per problem) as CSV");
  optimize->add_option("--figure", opt.figure,
                       "what a problem's best minimises: device (default), warm, cold or call");
  optimize->add_option("--transfer-from", opt.transfer_from,
                       "a GPU model in the store (as `anvil kernels` names it): each problem's "
                       "fastest configurations there are re-measured here first");

  optimize->add_flag("-q,--quiet", opt.quiet, "print the summary only");
  optimize->add_flag("-v,--verbose", opt.verbose, "print every line of the search");

  WatchArgs wa;
  CLI::App* watch = app.add_subcommand("watch", "follow a job's progress in the store until it ends");
  watch->add_option("job", wa.job, "job id (default: the newest job)");
  watch->add_option("--interval", wa.interval_s, "seconds between looks (default 1)")->check(CLI::Range(0.1, 60.0));
  watch->add_flag("-q,--quiet", wa.quiet, "print the end state only");
  watch->add_flag("-v,--verbose", wa.verbose, "print every change");

  EvalArgs ev;
  CLI::App* eval = app.add_subcommand("eval", "build one candidate file and measure it against cuBLAS");
  eval->add_option("file", ev.file, "CUDA source exporting the candidate ABI")->required();
  eval->add_option("--shape", ev.shapes, "MxNxK (repeatable: one build, measured on each)")->required();
  eval->add_option("--layout", ev.layout, "nt or nn");
  eval->add_option("--arch", ev.arch, "sm_90a or sm_90");
  eval->add_option("--param", ev.params, "knob KEY=VALUE, passed as -DANVIL_KEY=VALUE");
  eval->add_option("--rounds", ev.rounds, "interleaved timing rounds (default 5)")->check(CLI::Range(1, 100));
  eval->add_option("--operand-sets", ev.operand_sets,
                   "operand sets (places in device memory) the samples rotate through (default 4)")
      ->check(CLI::Range(1, 16));
  eval->add_flag("--profile", ev.profile,
                 "after timing, profile one call of it and of the fastest baseline with GPU "
                 "counters (CUPTI; the call is replayed once per pass)");

  std::string gpu, klayout, figure = "device", kjob;
  CLI::App* kernels = app.add_subcommand("kernels", "list the best verified kernel per problem");
  kernels->add_option("--gpu", gpu, "only this device model");
  kernels->add_option("--layout", klayout, "only nt or nn");
  kernels->add_option("--figure", figure, "device, warm, cold or call");
  kernels->add_option("--job", kjob, "the winners of this optimize job instead (its id)");

  ReportArgs rep;
  CLI::App* report = app.add_subcommand("report", "write one self-contained HTML report of the search");
  report->add_option("--out", rep.out, "HTML file to write")->required();
  report->add_option("--job", rep.job, "only this job (its id)");
  report->add_option("--gpu", rep.gpu, "only problems on this device model");
  report->add_option("--figure", rep.figure,
                     "ranking regime, e.g. device or cold (default: the job's, else the first measured)");

  CLI::App* doctor = app.add_subcommand("doctor", "report the toolchain, GPUs and database");
  CLI::App* xport = app.add_subcommand("export", "build the per-shape kernel library");
  CLI::App* serve = app.add_subcommand("serve", "run the gRPC coordinator");
  CLI::App* worker = app.add_subcommand("worker", "run a GPU worker daemon");
  for (CLI::App* sub : {xport, serve, worker}) sub->allow_extras();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::cerr << "anvil: " << e.what() << " (see anvil --help)\n";
    return kUsage;
  }
  ev.store = app.get_option("--db")->count() > 0 || std::getenv("ANVIL_DB");
  if (*optimize) return RunOptimize(g, opt);
  if (*eval) return RunEval(g, ev);
  if (*report) return RunReport(g, rep);
  if (*watch) return RunWatch(g, wa);
  if (*kernels) return RunKernels(g, gpu, klayout, figure, kjob);
  if (*doctor) return RunDoctor(g);
  if (*xport) return RunNotYet(g, "export (the per-shape kernel library)", "anvil kernels lists the winners stored so far");
  if (*serve) return RunNotYet(g, "serve (the gRPC coordinator)", "anvil optimize runs the same search in local mode");
  if (*worker) return RunNotYet(g, "worker (the fleet daemon)", "anvil optimize and anvil eval run a local worker on this node's GPU");
  return kUsage;
}
