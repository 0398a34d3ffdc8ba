#include "server/local_evaluator.h"

#include "server/local_worker.h"

namespace anvil {

absl::StatusOr<std::unique_ptr<LocalEvaluator>> LocalEvaluator::Create(LocalWorkerOptions options) {
  absl::StatusOr<Toolchain> t = Toolchain::Find();
  if (!t.ok()) return t.status();
  if (options.cache_dir.empty()) options.cache_dir = DefaultBuildCacheDir();
  return std::unique_ptr<LocalEvaluator>(new LocalEvaluator(*t, options));
}

LocalEvaluator::LocalEvaluator(Toolchain toolchain, const LocalWorkerOptions& options)
    : builder_(MakeBuilderOptions(toolchain, options)),
      evaluator_(MakeEvaluatorOptions(toolchain, options)) {}

std::vector<absl::StatusOr<v1::Build>> LocalEvaluator::Build(const std::vector<v1::Candidate>& candidates) {
  return builder_.BuildAll(candidates);
}

std::vector<absl::StatusOr<MeasureResult>> LocalEvaluator::Measure(
    const std::vector<MeasureRequest>& requests) {
  std::vector<absl::StatusOr<MeasureResult>> out;
  for (const MeasureRequest& r : requests) out.push_back(MeasureOne(r));
  return out;
}

absl::StatusOr<MeasureResult> LocalEvaluator::MeasureOne(const MeasureRequest& request) {
  if (request.build.verdict() != v1::VERDICT_PASSED) {
    return absl::InvalidArgumentError("measuring a candidate that did not build");
  }
  for (const v1::LtAlgo& a : request.known_lt_algos) MergeTunedAlgo(lt_algos_, a);
  absl::StatusOr<Evaluation> ev =
      evaluator_.Evaluate(request.candidate, request.build, request.shapes, lt_algos_);
  if (!ev.ok()) return ev.status();
  std::optional<v1::RunnerInfo> info;
  {
    absl::MutexLock lock(&mu_);
    if (ev->info) info_ = ev->info;
    info = info_;
  }
  MeasureResult r;
  r.gpu_seconds = ev->seconds;
  for (v1::LtAlgo& a : ev->tuned) {
    if (info) a.set_gpu(info->gpu());
    MergeTunedAlgo(lt_algos_, a);
    r.tuned.push_back(std::move(a));
  }
  r.measurements = std::move(ev->measurements);
  for (v1::Measurement& m : r.measurements) {
    if (info && m.problem().gpu().empty()) {
      m.mutable_problem()->set_gpu(info->gpu());
      m.mutable_problem()->set_arch(info->arch());
    }
  }
  return r;
}

std::optional<v1::RunnerInfo> LocalEvaluator::device() const {
  absl::MutexLock lock(&mu_);
  return info_;
}

}  // namespace anvil
