// Plain records the store reads and writes beside the anvil.v1 messages: for
// things that have no proto of their own (rewards, LLM exchanges, workers,
// the cuBLASLt algorithm cache) or that need the row id a proto lacks.
// Value types; no synchronisation of their own.
#ifndef ANVIL_STORE_RECORDS_H_
#define ANVIL_STORE_RECORDS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "anvil/v1/fleet.pb.h"
#include "anvil/v1/kernel_search.pb.h"
#include "anvil/v1/types.pb.h"

namespace anvil {

// Timing figures a query can rank by: the median of that figure, lower is
// better. Any other name is InvalidArgument.
//   "device", "warm", "cold", "call"

// A measurement together with its row id and the job that produced it.
struct StoredMeasurement {
  int64_t id = 0;               // measurements.id
  std::string job_id;           // empty when measured outside a job
  v1::Measurement measurement;  // with baselines; sample_us only where noted
};

// A build together with when it was stored (for reports over a time window).
struct StoredBuild {
  int64_t id = 0;               // builds.id
  int64_t created_unix_ms = 0;  // when it was stored
  v1::Build build;              // without usage
};

// One contrastive example: a PASSED measurement and the candidate measured.
struct Exemplar {
  StoredMeasurement measurement;
  v1::Candidate candidate;
};

// The fastest and slowest PASSED candidates on a problem, one entry per
// distinct candidate (its best measurement for `fastest`, its worst for
// `slowest`). `fastest` is fastest first, `slowest` slowest first; a
// candidate never appears in both.
struct ExemplarSet {
  std::vector<Exemplar> fastest;
  std::vector<Exemplar> slowest;
};

// A reward given to a candidate, usually for one measurement. Failures that
// never produced a measurement (compile errors) have measurement_id 0.
struct Reward {
  int64_t id = 0;                      // set by the store
  int64_t measurement_id = 0;          // measurements.id, 0 when none
  std::string candidate_id;            // required
  std::optional<v1::Problem> problem;  // the problem rewarded, when known
  std::string job_id;                  // empty when outside a job
  double value = 0;                    // the reward
  std::string kind;                    // "speedup", "compile_error", ...
  std::string figure;                  // timing figure used, e.g. "device"
  std::string details_json = "{}";     // free-form JSON object
  int64_t created_unix_ms = 0;         // 0: the store's clock
};

// One request/response with an LLM endpoint, kept for training-data export.
struct LlmExchange {
  int64_t id = 0;                      // set by the store
  std::string job_id;                  // empty when outside a job
  std::optional<v1::Problem> problem;  // the problem the prompt was about
  std::string candidate_id;            // candidate it produced (may be stored later)
  std::string model;
  std::string endpoint;
  std::string prompt;
  std::string response;
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  double latency_ms = 0;
  std::string error;            // empty on success
  int64_t created_unix_ms = 0;  // 0: the store's clock
};

// A registered GPU worker daemon.
struct WorkerRecord {
  std::string id;
  std::string hostname;
  std::vector<v1::GpuInfo> gpus;
  int32_t build_jobs = 0;
  std::string versions;                // "cuda=13.0 cublas=13.1.0 driver=..."
  std::string state = "alive";         // free text: "alive", "dead", "draining"
  int64_t registered_unix_ms = 0;      // set by the store on first upsert
  int64_t last_heartbeat_unix_ms = 0;  // set by the store
};

// The autotuned cuBLASLt algorithm for one problem and cuBLAS version.
struct LtAlgo {
  std::string algo;              // raw bytes of cublasLtMatmulAlgo_t (64 bytes)
  int64_t measured_unix_ms = 0;  // 0 on put: the store's clock
};

// What a job has measured so far, per problem, read from its measurement
// rows (a running job writes its ProblemProgress rows only as it ends).
struct ProblemActivity {
  v1::Problem problem;
  int64_t measurements = 0;    // rows of this job on the problem
  int64_t candidates = 0;      // distinct candidates among them
  int64_t failed = 0;          // rows whose verdict is not PASSED
  double best_speedup = 0;     // fastest baseline / candidate over PASSED rows (0: none)
  int64_t last_measured_unix_ms = 0;
};
struct JobActivity {
  std::string job_id;
  int64_t measurements = 0;     // all rows of the job
  int64_t builds = 0;           // builds stored since the job was created (to its last update
                                // once it ended): builds carry no job id
  int64_t failed_builds = 0;    // of which not PASSED
  std::vector<ProblemActivity> problems;  // ordered by the problem's first measurement
};

// Row counts of the main tables, for status displays and tests.
struct StoreCounts {
  int64_t problems = 0;
  int64_t candidates = 0;
  int64_t builds = 0;
  int64_t measurements = 0;
  int64_t baselines = 0;
  int64_t rewards = 0;
  int64_t jobs = 0;
  int64_t workers = 0;
  int64_t llm_exchanges = 0;
};

}  // namespace anvil

#endif  // ANVIL_STORE_RECORDS_H_
