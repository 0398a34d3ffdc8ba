// Store: Anvil's SQLite database of problems, candidates, builds,
// measurements, rewards, jobs, workers and LLM exchanges. It speaks anvil.v1
// messages; nothing outside store/ writes SQL. Schema: store/SCHEMA.md.
//
// Thread-safety: a Store is safe to share between threads. It owns exactly
// one SQLite connection, guarded by one mutex, so calls run one at a time.
// Never open a second read-write Store on the same file (in this or another
// process): SQLite 3.40 can corrupt a WAL database when two connections
// write or checkpoint at once. Read-only opens (options.read_only) are for
// other processes such as the CLI.
//
// Durability: WAL journal, synchronous=NORMAL. A committed call survives a
// crash of the process; a power cut may lose the last commits but never
// corrupts the file. Every call that writes several rows is one transaction:
// it is stored whole or not at all, and a failed call loses nothing that was
// already stored.
//
// Errors: NotFound (missing file or row), InvalidArgument (bad input,
// foreign-key or check failure), AlreadyExists (conflicting row),
// ResourceExhausted (disk or database full), Unavailable (database busy),
// DataLoss (corrupt or not a database), FailedPrecondition (wrong schema
// version, read-only store).
#ifndef ANVIL_STORE_STORE_H_
#define ANVIL_STORE_STORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "store/records.h"

namespace anvil {

namespace store_internal {
class Db;
}  // namespace store_internal

struct StoreOptions {
  bool create_if_missing = true;  // create the file and schema when absent
  bool read_only = false;         // no writes, no migrations (for the CLI)
  int busy_timeout_ms = 5000;     // wait this long for another process's lock
  bool quick_check = true;        // run PRAGMA quick_check on open
  int64_t max_page_count = 0;     // cap on database pages; 0: SQLite's default
  // Clock for created_at/updated_at stamps (ms since epoch); null: system clock.
  std::function<int64_t()> now_unix_ms;
};

class Store {
 public:
  using Options = StoreOptions;

  // Opens (and creates or migrates, unless read-only) the database at path.
  static absl::StatusOr<std::unique_ptr<Store>> Open(const std::string& path,
                                                     const Options& options = Options());
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  int SchemaVersion() const { return schema_version_; }  // PRAGMA user_version
  static int LatestSchemaVersion();                      // what this code knows
  const std::string& path() const { return path_; }

  // Problems, candidates, builds.
  absl::StatusOr<int64_t> UpsertProblem(const v1::Problem& problem);
  // Idempotent on candidate.id; AlreadyExists if the id is stored with another source.
  absl::Status PutCandidate(const v1::Candidate& candidate);
  absl::StatusOr<v1::Candidate> GetCandidate(const std::string& id);
  absl::StatusOr<int64_t> PutBuild(const v1::Build& build);  // REQUIRES: candidate stored
  absl::StatusOr<std::optional<v1::Build>> LatestBuild(const std::string& candidate_id);
  absl::StatusOr<std::optional<v1::Build>> FindBuildByCacheKey(const std::string& cache_key);
  // Builds stored at or after since_unix_ms and (until_unix_ms > 0) at or
  // before until_unix_ms, oldest first, without usage; at most `limit` rows
  // (<= 0: all). For reports: failures by verdict and the time they cost.
  absl::StatusOr<std::vector<StoredBuild>> ListBuilds(int64_t since_unix_ms, int64_t until_unix_ms,
                                                      int limit = 0);

  // Measurements. One transaction for all rows; ids[i] answers measurements[i].
  // REQUIRES: every candidate (and the job, when given) stored.
  absl::StatusOr<std::vector<int64_t>> PutMeasurements(
      std::span<const v1::Measurement> measurements,
      const std::optional<std::string>& job_id = std::nullopt);
  absl::StatusOr<int64_t> PutMeasurement(const v1::Measurement& measurement,
                                         const std::optional<std::string>& job_id = std::nullopt);
  absl::StatusOr<StoredMeasurement> GetMeasurement(int64_t id);  // with samples
  absl::Status MarkVerified(int64_t measurement_id);
  absl::StatusOr<int64_t> PutReward(const Reward& reward);
  absl::StatusOr<std::vector<Reward>> ListRewards(const std::string& job_id);

  // Jobs. CreateJob stores the request in state QUEUED; per-problem rows come
  // from UpdateJobProblem (keyed by job and problem, in first-update order).
  absl::Status CreateJob(const std::string& job_id, const v1::OptimizeKernelRequest& request);
  // CreateJob keyed by a client's request id, in one transaction: the job id
  // stored for `request_id` when it exists with the same `request_sha256`
  // (a replay), AlreadyExists when it exists with another body, else
  // `job_id`, created. REQUIRES: request_id non-empty.
  absl::StatusOr<std::string> CreateJobForRequest(const std::string& job_id,
                                                  const v1::OptimizeKernelRequest& request,
                                                  const std::string& request_id,
                                                  const std::string& request_sha256);
  // Adds to a job's spent wall and GPU seconds (Job.wall_seconds, gpu_seconds).
  absl::Status AddJobUsage(const std::string& job_id, double wall_seconds, double gpu_seconds);
  absl::Status UpdateJobState(const std::string& job_id, v1::JobState state,
                              const std::string& error = "");
  absl::Status UpdateJobProblem(const std::string& job_id, const v1::ProblemProgress& progress);
  absl::StatusOr<v1::Job> GetJob(const std::string& job_id);
  absl::StatusOr<v1::OptimizeKernelRequest> GetJobRequest(const std::string& job_id);
  // Newest first; state UNSPECIFIED lists every state.
  absl::StatusOr<std::vector<v1::Job>> ListJobs(int limit = 100,
                                                v1::JobState state = v1::JOB_STATE_UNSPECIFIED);

  // Workers.
  absl::Status UpsertWorker(const WorkerRecord& worker);
  absl::Status RecordHeartbeat(const std::string& worker_id);
  absl::StatusOr<std::vector<WorkerRecord>> ListWorkers();
  absl::StatusOr<WorkerRecord> GetWorker(const std::string& worker_id);
  // Counts one reported task of a worker: its kind ("build" or "measure")
  // and wall time, and whether it failed for a reason that is not the
  // candidate's (infrastructure: driver error, runner crash before candidate
  // code ran; or a result refused as malformed). `quarantine_after`
  // consecutive such failures of one kind (its builds, or its measurements)
  // quarantine the worker with `reason`; a clean run of that kind resets the
  // count. Returns the worker.
  absl::StatusOr<WorkerRecord> RecordWorkerRun(const std::string& worker_id,
                                               const std::string& kind, double seconds,
                                               bool infra_failure, const std::string& reason,
                                               int quarantine_after);
  // Records evidence against a worker (WorkerEvidence) and returns the
  // worker after. Disagreements quarantine it once `quarantine_after` of them,
  // with at least two different other workers, are unsettled: the odd one
  // out, not merely one side of a pair. NotFound for an unknown worker.
  absl::StatusOr<WorkerRecord> RecordEvidence(const WorkerEvidence& evidence, int quarantine_after);
  // Newest first, at most `limit`; worker_id "" for every worker's.
  absl::StatusOr<std::vector<WorkerEvidence>> ListEvidence(const std::string& worker_id, int limit = 100);
  // Lifts a quarantine (an operator fixed the node): its failure count
  // starts over and the evidence held against it is settled (kept, no
  // longer counted).
  absl::Status ClearQuarantine(const std::string& worker_id);

  // The fleet's task queue (store/SCHEMA.md, "Tasks"). Every call is one
  // transaction, so a restart keeps the queue as the last call left it.
  // Stores a queued task; idempotent on task.id: a task stored before is
  // left as it is (queued, leased, done or cancelled), except that a parked
  // one is queued again (its job's new run takes it over). REQUIRES: id,
  // kind, candidate_id and payload set.
  absl::Status EnqueueTask(const TaskRecord& task);
  // Returns every expired lease to the queue (counting it), then leases the
  // oldest queued, unparked task the request can take: a measure task
  // needing the request's GPU model (and not avoiding its GPU while
  // others_alive) first, then a build task when take_builds. nullopt when
  // there is none. The lease's attempt is the task's new attempt.
  absl::StatusOr<std::optional<TaskRecord>> LeaseTask(const TaskLeaseRequest& request);
  // Extends the leases of `task_ids` held by the worker by lease_ms and
  // records its heartbeat. Returns the ids it should abandon: cancelled,
  // done, re-leased to another or unknown.
  absl::StatusOr<std::vector<std::string>> RenewLeases(const std::string& worker_id,
                                                       const std::vector<std::string>& task_ids,
                                                       int64_t lease_ms);
  // Stores a task's result, keyed by task id and attempt: accepted once;
  // the same attempt reported again is kAlreadyAccepted and changes nothing;
  // a result of a lease that has expired (or of another worker or attempt)
  // is kRefused, stores nothing, and returns an expired lease to the queue.
  // NotFound for an unknown task.
  absl::StatusOr<TaskResultOutcome> ReportTaskResult(const std::string& task_id, int32_t attempt,
                                                     const std::string& worker_id,
                                                     const std::string& result);
  // Returns a lease to the queue at once (its holder could not run it for a
  // reason that is not the candidate's); false when the lease was no longer
  // the worker's (expired, re-leased, done).
  absl::StatusOr<bool> ReleaseTask(const std::string& task_id, int32_t attempt,
                                   const std::string& worker_id);
  // Returns expired leases to the queue; how many.
  absl::StatusOr<int64_t> ExpireLeases();
  // Gives every lease held now at least lease_ms from now (a server starting
  // again: its workers could not renew while it was down, and their work is
  // not to be thrown away for that); how many.
  absl::StatusOr<int64_t> ExtendLeases(int64_t lease_ms);
  absl::StatusOr<TaskRecord> GetTask(const std::string& task_id);
  // Cancels a job's queued (parked too) and leased tasks; how many.
  absl::StatusOr<int64_t> CancelTasks(const std::string& job_id);
  // Parks a job's queued tasks (its run stopped; a later run submits again
  // what it still wants); how many.
  absl::StatusOr<int64_t> ParkTasks(const std::string& job_id);
  // Marks a task's result as handed to the coordinator.
  absl::Status MarkTaskCollected(const std::string& task_id);
  absl::StatusOr<TaskCounts> CountTasks();
  // Tasks in a state ("" for all), oldest first, at most limit.
  absl::StatusOr<std::vector<TaskRecord>> ListTasks(const std::string& state, int limit = 1000);

  // LLM exchanges (training-data export) and the cuBLASLt algorithm cache.
  // Stores the exchange and its samples in one transaction.
  absl::StatusOr<int64_t> PutLlmExchange(const LlmExchange& exchange);
  // With their samples, in sample order.
  absl::StatusOr<std::vector<LlmExchange>> ListLlmExchanges(const std::string& job_id);
  // Sets a stored sample's candidate, reward and advantage. NotFound when absent.
  absl::Status SetLlmSampleOutcome(int64_t exchange_id, int sample_index, const LlmSample& outcome);
  // The cached choice tuned by `figure` ("device", "graph-hot", "graph-cold").
  absl::StatusOr<std::optional<LtAlgo>> GetLtAlgo(const v1::Problem& problem,
                                                  const std::string& cublas_version,
                                                  const std::string& figure = "device");
  // Every cached choice for the problem and version, one per figure.
  absl::StatusOr<std::vector<LtAlgo>> GetLtAlgos(const v1::Problem& problem,
                                                 const std::string& cublas_version);
  absl::Status PutLtAlgo(const v1::Problem& problem, const std::string& cublas_version,
                         const LtAlgo& algo);

  // Queries. figure: "graph-cold", "graph-hot", "device", "cold", "warm" or
  // "call" (Timings says what each measures).
  // The best PASSED and verified measurement on the problem by proto/figures.h's
  // rule (Beats: the lowest median, of equal ones the first measured), with its
  // candidate and build (samples included); nullopt when there is none.
  absl::StatusOr<std::optional<v1::Kernel>> BestKernel(const v1::Problem& problem,
                                                       const std::string& figure);
  // BestKernel for every problem matching the filters (empty gpu, LAYOUT_UNSPECIFIED:
  // any), ordered by gpu, arch, M, N, K, layout. limit <= 0 means 100.
  absl::StatusOr<std::vector<v1::Kernel>> ListBestKernels(const std::string& gpu, v1::Layout layout,
                                                          const std::string& figure, int limit);
  // A candidate with its build and one measurement: its best PASSED one on
  // `problem` by the same rule (verified first), or without a problem its
  // latest verified PASSED one (else latest PASSED); with `job_id`, only that
  // job's measurements count. NotFound for an unknown candidate; the
  // measurement is left empty when none matches.
  absl::StatusOr<v1::Kernel> GetKernel(const std::string& candidate_id,
                                       const std::optional<v1::Problem>& problem,
                                       const std::string& figure = "device",
                                       const std::optional<std::string>& job_id = std::nullopt);
  // Measurements on a problem (of one job, when given) in measured_at order,
  // with baselines, without sample_us.
  absl::StatusOr<std::vector<StoredMeasurement>> SearchHistory(
      const v1::Problem& problem, const std::optional<std::string>& job_id = std::nullopt);
  // Up to n fastest and n slowest PASSED candidates (see ExemplarSet).
  absl::StatusOr<ExemplarSet> Exemplars(const v1::Problem& problem, const std::string& figure,
                                        int n);
  absl::StatusOr<int64_t> CountMeasurements(const v1::Problem& problem);
  absl::StatusOr<StoreCounts> Counts();
  // Every stored problem on `gpu` (empty: any), ordered by gpu, arch, M, N, K, layout.
  absl::StatusOr<std::vector<v1::Problem>> ListProblems(const std::string& gpu);
  // A job's measurements so far, counted per problem, with the best PASSED
  // speedup by `figure`. NotFound for an unknown job. (store/activity.cc)
  absl::StatusOr<JobActivity> GetJobActivity(const std::string& job_id, const std::string& figure);

 private:
  Store(std::string path, Options options, std::unique_ptr<store_internal::Db> db,
        int schema_version);
  int64_t Now() const;

  const std::string path_;
  const Options options_;
  const int schema_version_;
  absl::Mutex mu_;
  std::unique_ptr<store_internal::Db> db_ ABSL_GUARDED_BY(mu_);
};

}  // namespace anvil

#endif  // ANVIL_STORE_STORE_H_
