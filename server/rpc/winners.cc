#include "server/rpc/winners.h"

namespace anvil {

absl::StatusOr<std::vector<v1::Kernel>> ListWinners(Store& store, const std::string& gpu,
                                                    v1::Layout layout, const std::string& figure,
                                                    const std::string& job_id, int limit) {
  if (job_id.empty()) return store.ListBestKernels(gpu, layout, figure, limit);
  absl::StatusOr<v1::Job> job = store.GetJob(job_id);
  if (!job.ok()) return job.status();
  std::vector<v1::Kernel> out;
  for (const v1::ProblemProgress& p : job->problems()) {
    if (p.best_candidate_id().empty()) continue;
    if (!gpu.empty() && p.problem().gpu() != gpu) continue;
    if (layout != v1::LAYOUT_UNSPECIFIED && p.problem().layout() != layout) continue;
    if (limit > 0 && static_cast<int>(out.size()) >= limit) break;
    absl::StatusOr<v1::Kernel> k = store.GetKernel(p.best_candidate_id(), p.problem(), figure, job_id);
    if (k.ok() && !k->has_measurement()) k = store.GetKernel(p.best_candidate_id(), p.problem(), figure);
    if (!k.ok()) return k.status();
    out.push_back(*std::move(k));
  }
  return out;
}

}  // namespace anvil
