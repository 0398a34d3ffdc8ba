// anvil: the command-line front of Anvil. See README.md for the commands.
// main() wires each subcommand's flags into its arguments (one Add<Sub> per
// subcommand, in the order --help lists them), parses, and runs the one given.
#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/cli.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

namespace anvil::cli {
namespace {

// What every subcommand's flags are parsed into.
struct Args {
  Globals g;
  OptimizeArgs optimize;
  WatchArgs watch;
  EvalArgs eval;
  std::string kernels_gpu, kernels_layout, kernels_figure = "graph-cold", kernels_job;
  ReportArgs report;
  bool migrate = false;  // doctor --migrate
  std::string traj_job, traj_format = "jsonl", traj_out;
  ExportArgs xport;
  std::string jobs_state;
  int jobs_limit = 50;
  std::string clear_id;  // workers --clear-quarantine
  std::string cancel_job;
};

// The subcommands, to tell after parsing which one was given.
struct Commands {
  CLI::App* optimize;
  CLI::App* watch;
  CLI::App* eval;
  CLI::App* kernels;
  CLI::App* report;
  CLI::App* doctor;
  CLI::App* traj;
  CLI::App* xport;
  CLI::App* serve;
  CLI::App* worker;
  CLI::App* jobs;
  CLI::App* workers;
  CLI::App* cancel;
};

void AddGlobals(CLI::App& app, Globals& g) {
  if (const char* db = std::getenv("ANVIL_DB")) g.db = db;
  app.add_option("--db", g.db, "SQLite store (default: $ANVIL_DB or ./anvil.db)");
  app.add_flag("--json", g.json, "machine-readable output");
  if (const char* v = std::getenv("ANVIL_ALLOW_NO_ISOLATION")) g.allow_no_isolation = *v && std::string(v) != "0";
  app.add_flag("--allow-no-isolation", g.allow_no_isolation,
               "where the node refuses namespaces, build and run untrusted kernels with "
               "process-level protections only (no private filesystem, network or pids); "
               "default: refuse (also $ANVIL_ALLOW_NO_ISOLATION=1)");
  if (const char* server = std::getenv("ANVIL_SERVER")) g.server = server;
  app.add_option("--server", g.server,
                 "HOST:PORT of `anvil serve`: optimize, kernels, export, jobs, workers, watch and cancel "
                 "talk to it instead of the store (default: $ANVIL_SERVER)");
  app.add_option("--token-file", g.token_file, "bearer token for --server (default: $ANVIL_AUTH_TOKEN)");
  app.add_flag("--tls", g.tls, "--server speaks TLS (system roots)");
  app.add_option("--tls-ca", g.tls_ca, "PEM roots to trust for --server (implies --tls)");
  app.footer("Exit codes: 0 ok, 1 Anvil failed, 2 bad arguments, 3 not possible here "
             "(no GPU / not built yet / no isolation), 4 database unusable, 5 the candidate "
             "failed (its verdict and reason are printed).");
}

CLI::App* AddOptimize(CLI::App& app, OptimizeArgs& opt) {
  CLI::App* optimize = app.add_subcommand("optimize", "search kernels for problems and store the winners");
  optimize->add_option("--shapes", opt.shapes_file, "file of 'M N K layout' lines");
  optimize->add_option("--shape", opt.shapes, "MxNxK (repeatable)");
  optimize->add_option("--layout", opt.layout, "nt (C = A*B^T) or nn (C = A*B) for --shape");
  optimize->add_option("--budget-minutes", opt.budget_minutes,
                       "search time of this run; rerun to resume (default 60)")->check(CLI::Range(0.0, 10080.0));
  optimize->add_option("--build-jobs", opt.build_jobs, "parallel nvcc jobs (default: every core but two)")->check(CLI::Range(1, 256));
  optimize->add_option("--gpu", opt.gpu,
                       "device model the problems are for, as `anvil kernels` names it (default: the "
                       "evaluator's; one that measures on another model refuses the job)");
  optimize->add_flag("--seeds-only", opt.seeds_only, "measure the seed configurations only");
  optimize->add_option("--llm", opt.llm_config,
                       "JSON file naming an LLM endpoint that proposes kernels too (llm/LLM.md)");
  optimize->add_option("--curve", opt.curve_file, "write the search curve (best-so-far per problem) as CSV");
  optimize->add_option("--figure", opt.figure,
                       "what a problem's best minimises: graph-cold (default: CUDA-graph replay "
                       "with operands streamed from DRAM), graph-hot, device, cold, warm or call");
  optimize->add_option("--request-id", opt.request_id,
                       "with --server: an id making the call idempotent (a retry attaches to the same job)");
  optimize->add_flag("--detach", opt.detach, "with --server: print the job id and leave it running");
  optimize->add_option("--transfer-from", opt.transfer_from,
                       "a GPU model in the store (as `anvil kernels` names it): each problem's "
                       "fastest configurations there are re-measured here first");

  optimize->add_flag("-q,--quiet", opt.quiet, "print the summary only");
  optimize->add_flag("-v,--verbose", opt.verbose, "print every line of the search");
  return optimize;
}

CLI::App* AddWatch(CLI::App& app, WatchArgs& wa) {
  CLI::App* watch = app.add_subcommand(
      "watch", "follow a job's progress until it ends (with --server over gRPC, else in the store)");
  watch->add_option("job", wa.job, "job id (default: the store's newest job; anvil jobs lists a server's)");
  watch->add_option("--figure", wa.figure, "the figure of the summary table (--server)");
  watch->add_option("--interval", wa.interval_s, "seconds between looks at the store (default 1)")
      ->check(CLI::Range(0.1, 60.0));
  watch->add_flag("-q,--quiet", wa.quiet, "print the end state only");
  watch->add_flag("-v,--verbose", wa.verbose, "print every change");
  return watch;
}

CLI::App* AddEval(CLI::App& app, EvalArgs& ev) {
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
  eval->add_flag("--graph-trace", ev.graph_trace,
                 "watch one graph replay per regime of every implementation with CUPTI: kernel "
                 "time and the gap between kernels per call");
  eval->add_flag("--profile", ev.profile,
                 "after timing, profile one call of it and of the fastest baseline with GPU "
                 "counters (CUPTI; the call is replayed once per pass)");
  return eval;
}

CLI::App* AddKernels(CLI::App& app, Args& a) {
  CLI::App* kernels = app.add_subcommand("kernels", "list the best verified kernel per problem");
  kernels->add_option("--gpu", a.kernels_gpu, "only this device model");
  kernels->add_option("--layout", a.kernels_layout, "only nt or nn");
  kernels->add_option("--figure", a.kernels_figure, "graph-cold (default), graph-hot, device, cold, warm or call");
  kernels->add_option("--job", a.kernels_job, "the winners of this optimize job instead (its id)");
  return kernels;
}

CLI::App* AddReport(CLI::App& app, ReportArgs& rep) {
  CLI::App* report = app.add_subcommand("report", "write one self-contained HTML report of the search");
  report->add_option("--out", rep.out, "HTML file to write")->required();
  report->add_option("--job", rep.job, "only this job (its id)");
  report->add_option("--gpu", rep.gpu, "only problems on this device model");
  report->add_option("--figure", rep.figure,
                     "ranking regime, e.g. device or cold (default: the job's, else the first measured)");
  return report;
}

CLI::App* AddDoctor(CLI::App& app, bool& migrate) {
  CLI::App* doctor = app.add_subcommand("doctor", "report the toolchain, GPUs and database");
  doctor->add_flag("--migrate", migrate,
                   "instead: open the database read-write once, applying the schema steps it lacks");
  return doctor;
}

CLI::App* AddTrajectories(CLI::App& app, Args& a) {
  CLI::App* traj = app.add_subcommand("export-trajectories",
                                      "a job's LLM prompts, responses, rewards and advantages for RL");
  traj->add_option("--job", a.traj_job, "the job's id")->required();
  traj->add_option("--format", a.traj_format, "jsonl (TRL prompt-completion with reward, advantage)");
  traj->add_option("--out", a.traj_out, "output file (default: stdout)");
  return traj;
}

CLI::App* AddExport(CLI::App& app, ExportArgs& ex) {
  CLI::App* xport = app.add_subcommand("export", "write the kernel package (library, manifest, CMake, Python) for one GPU");
  xport->add_option("--gpu", ex.gpu, "device model, as `anvil kernels` names it")->required();
  xport->add_option("--problems", ex.problems_file, "file of 'M N K layout' lines (default: every winner)");
  xport->add_option("--out", ex.out_dir, "package directory (a previous export there is replaced)")->required();
  xport->add_option("--margin", ex.margin, "required win over the best baseline in both regimes (default 0.02)")
      ->check(CLI::Range(0.0, 0.99));
  return xport;
}

// serve and worker take their own options (server/CONFIG.md,
// worker/fleet/worker_main.h), not the global ones, and print their own help:
// `anvil serve --metrics-listen H:P` reaches serve.
CLI::App* AddDaemon(CLI::App& app, const char* name, const char* help) {
  CLI::App* daemon = app.add_subcommand(name, help);
  daemon->prefix_command();
  daemon->fallthrough(false);
  daemon->set_help_flag();
  return daemon;
}

CLI::App* AddJobs(CLI::App& app, Args& a) {
  CLI::App* jobs = app.add_subcommand("jobs", "list jobs, newest first (the server's with --server, else the store's)");
  jobs->add_option("--state", a.jobs_state, "only queued, running, succeeded, failed or cancelled");
  jobs->add_option("--limit", a.jobs_limit, "most jobs listed (default 50)")->check(CLI::Range(1, 10000));
  return jobs;
}

CLI::App* AddWorkers(CLI::App& app, std::string& clear_id) {
  CLI::App* workers = app.add_subcommand("workers", "list the fleet's workers: state, GPUs, throughput (--server)");
  workers->add_option("--clear-quarantine", clear_id, "let this quarantined worker (its id) take tasks again");
  return workers;
}

CLI::App* AddCancel(CLI::App& app, std::string& job) {
  CLI::App* cancel = app.add_subcommand(
      "cancel", "stop a job; what it measured stays (through --server, else in the store with no server on it)");
  cancel->add_option("job", job, "job id")->required();
  return cancel;
}

Commands AddCommands(CLI::App& app, Args& a) {
  Commands c;
  c.optimize = AddOptimize(app, a.optimize);
  c.watch = AddWatch(app, a.watch);
  c.eval = AddEval(app, a.eval);
  c.kernels = AddKernels(app, a);
  c.report = AddReport(app, a.report);
  c.doctor = AddDoctor(app, a.migrate);
  c.traj = AddTrajectories(app, a);
  c.xport = AddExport(app, a.xport);
  c.serve = AddDaemon(app, "serve", "run the gRPC coordinator (anvil serve --help)");
  c.worker = AddDaemon(app, "worker", "run a fleet worker daemon (anvil worker --help)");
  c.jobs = AddJobs(app, a);
  c.workers = AddWorkers(app, a.clear_id);
  c.cancel = AddCancel(app, a.cancel_job);
  return c;
}

// anvil serve's own arguments, with the global --db as --server-db unless given.
int Serve(const CLI::App& app, const CLI::App& serve, const Globals& g) {
  std::vector<std::string> args = serve.remaining();
  const bool db_given = app.get_option("--db")->count() > 0 || std::getenv("ANVIL_DB");
  if (db_given && std::find(args.begin(), args.end(), "--server-db") == args.end()) {
    args.insert(args.begin(), {"--server-db", g.db});
  }
  return RunServe(args);
}

// anvil worker's own arguments, with the global --server and --token-file unless given.
int Worker(const CLI::App& worker, const Globals& g) {
  std::vector<std::string> args = worker.remaining();
  auto given = [&args](const char* flag) { return std::find(args.begin(), args.end(), flag) != args.end(); };
  if (!g.server.empty() && !given("--server")) args.insert(args.begin(), {"--server", g.server});
  if (!g.token_file.empty() && !given("--token-file")) args.insert(args.begin(), {"--token-file", g.token_file});
  return RunWorker(args);
}

// Runs the parsed subcommand.
int Run(const CLI::App& app, const Commands& c, Args& a) {
  const Globals& g = a.g;
  a.eval.store = app.get_option("--db")->count() > 0 || std::getenv("ANVIL_DB");
  for (CLI::App* remote_only : {c.workers}) {
    if (*remote_only && g.server.empty()) {
      std::cerr << "anvil " << remote_only->get_name() << ": needs --server HOST:PORT (or $ANVIL_SERVER)\n";
      return kUsage;
    }
  }
  if (*c.optimize) return g.server.empty() ? RunOptimize(g, a.optimize) : RunOptimizeRemote(g, a.optimize);
  if (*c.jobs) return RunJobs(g, a.jobs_state, a.jobs_limit);
  if (*c.workers) return RunWorkers(g, a.clear_id);
  if (*c.watch && !g.server.empty()) return RunWatchRemote(g, a.watch);
  if (*c.cancel) return RunCancel(g, a.cancel_job);
  if (*c.eval) return RunEval(g, a.eval);
  if (*c.report) return RunReport(g, a.report);
  if (*c.watch) return RunWatch(g, a.watch);
  if (*c.kernels) return RunKernels(g, a.kernels_gpu, a.kernels_layout, a.kernels_figure, a.kernels_job);
  if (*c.doctor) return RunDoctor(g, a.migrate);
  if (*c.traj) return RunExportTrajectories(g, a.traj_job, a.traj_format, a.traj_out);
  if (*c.xport) return g.server.empty() ? RunExport(g, a.xport) : RunExportRemote(g, a.xport);
  if (*c.serve) return Serve(app, *c.serve, g);
  if (*c.worker) return Worker(*c.worker, g);
  return kUsage;
}

}  // namespace
}  // namespace anvil::cli

int main(int argc, char** argv) {
  using namespace anvil::cli;
  // Logs go to stderr: stdout carries the results (--json lines among them).
  spdlog::set_default_logger(spdlog::stderr_color_mt("anvil"));
  CLI::App app{"Anvil: searches for HGEMM kernels faster than cuBLAS, one shape at a time"};
  app.require_subcommand(1);
  app.fallthrough();  // global options also after the command: `anvil doctor --json`
  Args a;
  AddGlobals(app, a.g);
  const Commands commands = AddCommands(app, a);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::cerr << "anvil: " << e.what() << " (see anvil --help)\n";
    return kUsage;
  }
  return Run(app, commands, a);
}
