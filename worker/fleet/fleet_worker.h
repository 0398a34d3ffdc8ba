// FleetWorker: the worker daemon of the fleet (`anvil worker --server`,
// `anvil-worker`). It registers its GPUs with the coordinator's Fleet service
// (proto/anvil/v1/fleet.proto), runs one lease loop per GPU slot (each slot's
// evaluator pinned to its GPU ordinal) and one per build slot (build tasks
// only; a GPU node has them too, so its cores build while its GPUs measure;
// --build-only: build slots alone); heartbeats its leases; and reports each
// result, retrying until the server answers (reports are idempotent by task
// id and attempt, so a retry never doubles a result).
//
// Artifacts: a build task's shared object is uploaded under its SHA-256 and
// the build reported with artifact "sha256:<hex>"; a measure task's artifact
// is fetched by that digest (from the local cache when there), its hash
// checked, and measured from the local copy. Candidates run only inside the
// evaluator's sandbox (the runner); this daemon never loads them.
//
// A slot whose evaluator fails (a non-OK status: driver error, runner dead
// before the candidate ran, no toolchain) reports an infrastructure error;
// the server queues the task again and counts it towards quarantine.
//
// Identity: it registers with the enrolment token (options.token) and is
// issued its own credential, which every later call carries; told it is
// unknown or its credential is not its own (the server lost its store, the
// node registered again elsewhere), it registers again. A task the server
// names in a heartbeat as no longer its own (its job was cancelled or ended,
// the lease went to another) is abandoned at the next safe point: the
// evaluator's context turns cancelled, the sandbox kills its nvcc or runner,
// and nothing is reported.
//
// Thread-safety: Run blocks; Stop may be called from any thread (a signal
// handler thread). REQUIRES: components outlive the worker.
#ifndef ANVIL_WORKER_FLEET_FLEET_WORKER_H_
#define ANVIL_WORKER_FLEET_FLEET_WORKER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "anvil/v1/fleet.pb.h"
#include "worker/candidate_evaluator.h"

namespace anvil {

struct FleetWorkerOptions {
  std::string server;          // HOST:PORT of anvil serve
  std::string token;           // bearer token; empty: none
  bool tls = false;            // TLS to the server instead of plaintext
  std::string tls_ca;          // PEM roots for TLS; empty: the system's
  std::string hostname;        // empty: gethostname()
  bool build_only = false;     // no GPU: build tasks only
  // Build tasks at once, beside the GPU slots. -1: one per two cores (as
  // `anvil optimize --build-jobs`). 0 (GPU workers only): none; the GPU slots
  // then build whenever no worker of the fleet has a build slot.
  int build_slots = -1;
  std::string cache_dir;       // artifacts fetched or built, by SHA-256
  double lease_wait_s = 5;     // each Lease call waits this long for work
  std::string versions;        // "cuda=... cublas=... driver=..."
};

struct FleetWorkerComponents {
  // This node's GPUs (empty with build_only).
  std::function<absl::StatusOr<std::vector<v1::GpuInfo>>()> gpus;
  // An evaluator for one slot: a GPU ordinal, or a negative number for a
  // build slot (-1, -2, ...: build slot 0, 1, ...).
  std::function<absl::StatusOr<std::unique_ptr<CandidateEvaluator>>(int ordinal)> evaluator;
  // "driver=... cuda=... cublas=..." of this node; null: none known.
  std::function<std::string()> versions;
  // Whether the sandboxed runs can read artifacts below the cache directory
  // (checked before registering, so a worker that could measure nothing
  // stops with the fix instead of failing every task); null: not checked.
  std::function<absl::Status(const std::string& cache_dir)> check_cache_dir;
};

class FleetWorker {
 public:
  FleetWorker(FleetWorkerOptions options, FleetWorkerComponents components);
  ~FleetWorker();
  // Registers and serves until Stop; an error when registration fails.
  absl::Status Run();
  void Stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace anvil

#endif  // ANVIL_WORKER_FLEET_FLEET_WORKER_H_
