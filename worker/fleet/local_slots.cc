// LocalWorkerComponents: this node's GPUs (CUDA runtime) and a LocalEvaluator
// per slot, pinned to its GPU by the evaluator's device ordinal.
#include "node/node_facts.h"
#include "worker/build_cache.h"
#include "worker/fleet/worker_main.h"
#include "worker/local_evaluator.h"

namespace anvil {

FleetWorkerComponents LocalWorkerComponents() {
  FleetWorkerComponents c;
  c.gpus = node::ListGpus;
  c.versions = [] { return node::WorkerVersions(node::ReadVersions()); };
  // The artifacts are loaded by the sandboxed runner: the build cache's rules
  // (reachable by the sandbox's uid, not swappable by another user).
  c.check_cache_dir = PrepareBuildCacheDir;
  c.evaluator = [](int ordinal) -> absl::StatusOr<std::unique_ptr<CandidateEvaluator>> {
    LocalEvaluatorOptions o;
    o.device = ordinal < 0 ? 0 : ordinal;
    o.build_jobs = DefaultBuildJobs();
    absl::StatusOr<std::unique_ptr<LocalEvaluator>> e = LocalEvaluator::Create(o);
    if (!e.ok()) return e.status();
    return std::unique_ptr<CandidateEvaluator>(*std::move(e));
  };
  return c;
}

}  // namespace anvil
