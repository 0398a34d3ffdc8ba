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

// One sample of an exchange: a choice the model returned and what became
// of it. status: "proposed" (a candidate went to be built and measured),
// "no_code", "abi", "policy", "duplicate" (refused before nvcc), "missing"
// (the server returned fewer choices). reward/advantage are set once known.
struct LlmSample {
  int64_t id = 0;  // set by the store
  int sample_index = 0;
  std::string response;
  std::string candidate_id;  // when proposed
  std::string status;
  std::string reason;
  std::optional<double> reward;
  std::optional<double> advantage;
  std::string reward_kind;  // "speedup", "compile_error", "rejected", ...
  // The fidelity of the measurements the reward came from ("screen",
  // "full"; "" when none did: a failed build, a refusal).
  std::string reward_fidelity;
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
  // Schema 6: the request as sent and what it cost, and its samples.
  std::string system_prompt;
  std::string messages_json = "[]";  // [{"role","content"}...]: the conversation sent
  std::string prompt_version;        // prompts/VERSION
  std::string recipe;                // the context recipe, e.g. "contrast"
  double cost_usd = 0;
  int64_t http_requests = 0;
  std::vector<LlmSample> samples;    // stored with the exchange, read back with it
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
  // Fleet bookkeeping, kept by the store (UpsertWorker leaves them as they are).
  std::string quarantine_reason;       // non-empty: quarantined, and why
  int32_t infra_failures = 0;          // consecutive failures that were not the candidate's
  int64_t builds = 0;                  // build tasks reported
  double build_seconds = 0;            // their summed wall time (s)
  int64_t measures = 0;                // measure tasks reported
  double measure_seconds = 0;          // their summed wall time (s)
  // SHA-256 (hex) of the credential the server issued at its registration;
  // every later call of the worker must carry the credential.
  std::string credential_sha256;
  int64_t disagreements = 0;           // its figures disagreed with another worker's (evidence rows)
  std::string last_evidence;           // the latest evidence held against it ("" for none)
};

// What the server holds against a worker (table worker_evidence).
struct WorkerEvidence {
  std::string worker_id;
  // "infrastructure": a failure of its own lease that was not the
  // candidate's; "malformed_report": a result the server refused as
  // malformed; "disagreement": its figure for a candidate disagreed with
  // another worker's (`other_worker`) on the same problem.
  std::string kind;
  std::string task_id;
  std::string candidate_id;
  std::string problem;       // "MxNxK nt" for disagreements
  std::string other_worker;
  std::string detail;        // what was seen, for the operator
  int64_t at_unix_ms = 0;    // set by the store
};

// One task of the fleet's queue (store/SCHEMA.md, "Tasks"). The store keeps
// the payload and result as opaque bytes (serialized anvil.v1 messages, the
// Fleet service's business).
struct TaskRecord {
  std::string id;
  std::string kind;                // "build" or "measure"
  std::string job_id;              // empty: no job
  std::string candidate_id;
  std::string gpu;                 // GPU model a measure task needs; "" for builds
  std::string payload;             // what the worker needs to run it
  std::string state = "queued";    // queued, leased, done, cancelled
  int32_t attempt = 0;             // leases so far; the current lease's number
  int32_t expired_leases = 0;      // leases that ran out before a result came
  std::string lease_owner;         // worker id while leased
  int32_t lease_slot = -1;         // the worker's GPU ordinal (negative: a build slot, -1, -2, ...)
  int64_t lease_expires_unix_ms = 0;
  std::string result;              // the accepted result, once done
  int32_t result_attempt = 0;      // the attempt whose result was accepted
  std::string result_worker;
  int64_t created_unix_ms = 0;
  int64_t updated_unix_ms = 0;
  // Queued by a run of its job that has since stopped: leased again only
  // once a later run of the job submits it again (EnqueueTask).
  bool parked = false;
  bool collected = false;          // its result was handed to the coordinator
  std::string avoid_gpus;          // GPU UUIDs (comma-separated) not to run on, where another is live
  std::string lease_gpu;           // the GPU UUID of the slot holding the lease ("" for a build slot)
};

// Who asks for a task and what it can take.
struct TaskLeaseRequest {
  std::string worker_id;
  int32_t slot = -1;             // GPU ordinal; -1 for a build slot
  std::string gpu;               // the slot's GPU model; "" takes no measure task
  bool take_builds = false;      // may take build tasks
  int64_t lease_ms = 30000;      // lease length
  std::string gpu_uuid;          // the slot's GPU
  // Another live GPU of the model exists: tasks that avoid this one
  // (TaskRecord::avoid_gpus) are left for it.
  bool others_alive = false;
};

// What became of a reported result.
enum class TaskResultOutcome {
  kAccepted,         // stored now
  kAlreadyAccepted,  // the same task and attempt was stored before (a retry)
  kRefused,          // the lease had expired, was re-leased or was not this worker's
};

// The queue at a glance.
struct TaskCounts {
  int64_t queued = 0;
  int64_t leased = 0;
  int64_t done = 0;
  int64_t cancelled = 0;
  int64_t expired_leases = 0;  // summed over every task
};

// The autotuned cuBLASLt algorithm for one problem, cuBLAS version and the
// figure it was tuned by ("device", "graph-hot", "graph-cold").
struct LtAlgo {
  std::string algo;              // raw bytes of cublasLtMatmulAlgo_t (64 bytes)
  int64_t measured_unix_ms = 0;  // 0 on put: the store's clock
  std::string figure = "device";
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
