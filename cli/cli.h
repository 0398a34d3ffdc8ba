// The anvil command line: one Run<Sub> per subcommand, sharing the global
// options. Exit codes (documented in README.md):
//   0 success; 1 Anvil itself failed; 2 bad arguments or input;
//   3 not possible here (no GPU, piece not built yet, no isolation, a
//   directory the sandbox cannot reach); 4 database unusable (missing,
//   corrupt, newer schema); 5 the candidate failed (anvil eval: any verdict
//   but PASSED -- REJECTED, COMPILE_ERROR, INCORRECT, CRASHED, TIMEOUT,
//   CHEAT, UNSUPPORTED -- printed with its reason, stored with --db).
#ifndef ANVIL_CLI_CLI_H_
#define ANVIL_CLI_CLI_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "anvil/v1/kernel_search.pb.h"
#include "google/protobuf/message.h"

namespace anvil::cli {

enum ExitCode {
  kOk = 0, kFailed = 1, kUsage = 2, kUnavailable = 3, kDatabase = 4, kCandidateFailed = 5
};

struct Globals {
  std::string db = "anvil.db";  // --db, or $ANVIL_DB
  bool json = false;            // --json: machine-readable output on stdout
  // --allow-no-isolation, or $ANVIL_ALLOW_NO_ISOLATION=1: build and run
  // untrusted kernels without namespace isolation where the node refuses it.
  bool allow_no_isolation = false;
  // --server HOST:PORT (or $ANVIL_SERVER): talk to `anvil serve` instead of the store.
  std::string server;
  std::string token_file;       // --token-file; else $ANVIL_AUTH_TOKEN holds the token
  bool tls = false;             // --tls: the server speaks TLS (system roots)
  std::string tls_ca;           // --tls-ca FILE: PEM roots to trust instead (implies --tls)
};

// Prints one clear line for `status` and maps it to an exit code.
int Report(const absl::Status& status, ExitCode code);
// One line of --json output: proto field names as in the .proto files.
std::string ToJson(const google::protobuf::Message& message);
// Printed wherever a GPU is needed and none is present.
std::string NoGpuAdvice();

struct EvalArgs {
  std::string file, layout = "nt", arch = "sm_90a";
  std::vector<std::string> shapes;  // MxNxK, measured with one build
  std::vector<std::string> params;  // KEY=VALUE knobs
  bool store = false;               // --db given: keep the results
  int rounds = 0;                   // --rounds: interleaved timing rounds (0: runner default)
  int operand_sets = 0;             // --operand-sets: operand sets the samples rotate through (0: runner default)
  bool profile = false;             // --profile: hardware counters of it and the fastest baseline
  bool graph_trace = false;         // --graph-trace: kernel time and gap per call in every graph replay
};
int RunEval(const Globals& g, const EvalArgs& a);

struct OptimizeArgs {
  std::string shapes_file;          // --shapes FILE ("M N K layout" lines)
  std::vector<std::string> shapes;  // --shape MxNxK (with --layout)
  std::string layout = "nt";
  double budget_minutes = 60;       // --budget-minutes: this run's search time
  int build_jobs = 0;               // --build-jobs: parallel nvcc (0: one per two cores)
  bool seeds_only = false;          // --seeds-only: stage 0 only
  std::string curve_file;           // --curve FILE: search curve CSV
  std::string transfer_from;        // --transfer-from GPU: start from its winners
  std::string figure = "graph-cold";  // --figure: what a problem's best minimises
  bool quiet = false;               // --quiet: the summary only
  bool verbose = false;             // --verbose: every line, every measurement
  std::string request_id;           // --request-id: a retried call attaches to the same job (--server)
  bool detach = false;              // --detach: print the job id and leave it running (--server)
  std::string llm_config;           // --llm FILE: an LLM proposer too (llm/LLM.md)
  std::string gpu;                  // --gpu MODEL: the problems' device model (empty: the evaluator's)
};
int RunOptimize(const Globals& g, const OptimizeArgs& a);
// The problems of an optimize command (--shapes, --shape; the development
// shapes when neither is given), as a request with its figure and budget.
absl::StatusOr<v1::OptimizeKernelRequest> OptimizeRequest(const OptimizeArgs& a);

struct ReportArgs {
  std::string job;     // --job ID: that job only
  std::string gpu;     // --gpu MODEL: problems on that GPU only
  std::string figure;  // --figure: the ranking regime (default: the job's, else the first measured)
  std::string out;     // --out FILE
};
int RunReport(const Globals& g, const ReportArgs& a);

struct WatchArgs {
  std::string job;          // the job to follow (default: the store's newest)
  std::string figure = "graph-cold";  // --figure: the summary table's (--server)
  double interval_s = 1.0;  // --interval: seconds between looks at the store
  bool quiet = false, verbose = false;
};
int RunWatch(const Globals& g, const WatchArgs& a);

int RunKernels(const Globals& g, const std::string& gpu, const std::string& layout,
               const std::string& figure, const std::string& job);
int RunDoctor(const Globals& g, bool migrate);  // migrate: bring the store to this schema

struct ExportArgs {
  std::string gpu;            // --gpu: the device model, as `anvil kernels` names it
  std::string problems_file;  // --problems FILE ("M N K layout" lines); empty: every winner
  std::string out_dir;        // --out DIR
  double margin = 0.02;       // --margin: required win over the best baseline in both regimes
};
int RunExport(const Globals& g, const ExportArgs& a);
// What an export wrote, one line per shape then the package (local and --server).
void PrintExport(const Globals& g, const v1::ExportLibraryResponse& r);
// The job's LLM samples as JSON Lines (format "jsonl") to out_path ("" or "-": stdout).
int RunExportTrajectories(const Globals& g, const std::string& job, const std::string& format,
                          const std::string& out_path);
int RunNotYet(const Globals& g, const std::string& what, const std::string& instead);

// Shared output of jobs and kernels (job_output.cc, kernels.cc): local mode
// and --server print the same.
void PrintProgress(const Globals& g, const v1::JobProgress& p);
void PrintJobSummary(const Globals& g, const v1::Job& job, const std::string& figure);
std::string JobStateName(v1::JobState state);
void PrintJobs(const Globals& g, const v1::ListJobsResponse& jobs);
void PrintKernels(const Globals& g, const std::vector<v1::Kernel>& kernels, const std::string& figure,
                  const std::string& where);

// anvil jobs / anvil cancel (jobs.cc): over --server, or on the store itself
// with no server: jobs reads it, cancel takes the store's writer lock (a
// server running on it refuses it; cancel through the server then).
int RunJobs(const Globals& g, const std::string& state, int limit);
int RunCancel(const Globals& g, const std::string& job_id);

// --server mode (remote.cc).
absl::StatusOr<std::string> ClientToken(const Globals& g);  // "" when none
int RunOptimizeRemote(const Globals& g, const OptimizeArgs& a);
int RunKernelsRemote(const Globals& g, const v1::ListKernelsRequest& request);
// --out is a folder below the server's export.root; --problems is read here.
int RunExportRemote(const Globals& g, const ExportArgs& a);
int RunJobsRemote(const Globals& g, const v1::ListJobsRequest& request);
// The fleet's workers (--server); with clear_id, lift that worker's quarantine first.
int RunWorkers(const Globals& g, const std::string& clear_id);
int RunWatchRemote(const Globals& g, const WatchArgs& a);
int RunCancelRemote(const Globals& g, const std::string& job_id);
// anvil serve: the gRPC coordinator on this node (server/rpc/serve_main.h).
int RunServe(const std::vector<std::string>& args);
int RunWorker(const std::vector<std::string>& args);

}  // namespace anvil::cli

#endif  // ANVIL_CLI_CLI_H_
