#include "server/local_worker.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "proto/problem.h"

namespace anvil {
namespace {

// The cuBLAS version a runner reported ("... cublas=130100 ..."), as the
// runner keys its tuned cuBLASLt choices.
std::string CublasVersion(const v1::RunnerInfo& info) {
  for (absl::string_view part : absl::StrSplit(info.versions(), ' ')) {
    if (absl::ConsumePrefix(&part, "cublas=")) return std::string(part);
  }
  return "";
}

}  // namespace

std::string DefaultBuildCacheDir() {
  if (const char* c = std::getenv("ANVIL_CACHE")) return c;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME")) return absl::StrCat(xdg, "/anvil/builds");
  if (const char* home = std::getenv("HOME")) return absl::StrCat(home, "/.cache/anvil/builds");
  return "/tmp/anvil-builds";
}

BuilderOptions MakeBuilderOptions(const Toolchain& toolchain, const LocalWorkerOptions& options) {
  BuilderOptions b;
  b.toolchain = toolchain;
  b.cache_dir = options.cache_dir;
  b.jobs = options.build_jobs;
  b.isolate = options.isolate;
  return b;
}

EvaluatorOptions MakeEvaluatorOptions(const Toolchain& toolchain, const LocalWorkerOptions& options) {
  EvaluatorOptions e;
  e.toolchain = toolchain;
  e.device = options.device;
  e.protocol = options.protocol;
  e.isolate = options.isolate;
  return e;
}

absl::StatusOr<std::unique_ptr<LocalWorker>> LocalWorker::Create(LocalWorkerOptions options) {
  absl::StatusOr<Toolchain> t = Toolchain::Find();
  if (!t.ok()) return t.status();
  if (options.cache_dir.empty()) options.cache_dir = DefaultBuildCacheDir();
  return std::unique_ptr<LocalWorker>(new LocalWorker(*t, std::move(options)));
}

LocalWorker::LocalWorker(Toolchain toolchain, LocalWorkerOptions options)
    : toolchain_(toolchain),
      builder_(MakeBuilderOptions(toolchain, options)),
      evaluator_(MakeEvaluatorOptions(toolchain, options)) {}

std::vector<absl::StatusOr<v1::Build>> LocalWorker::BuildAll(
    const std::vector<v1::Candidate>& candidates) {
  return builder_.BuildAll(candidates);
}

absl::StatusOr<CandidateOutcome> LocalWorker::Measure(const v1::Candidate& candidate,
                                                      const v1::Build& build,
                                                      const std::vector<v1::Shape>& shapes,
                                                      Store* store,
                                                      const std::optional<std::string>& job_id) {
  CandidateOutcome out;
  out.build = build;
  if (store) {
    if (absl::Status st = store->PutCandidate(candidate); !st.ok()) return st;
    if (absl::StatusOr<int64_t> id = store->PutBuild(build); !id.ok()) return id.status();
  }
  if (build.verdict() != v1::VERDICT_PASSED) return out;
  LoadLtAlgos(shapes, candidate.layout(), store);
  absl::StatusOr<Evaluation> ev = evaluator_.Evaluate(candidate, build, shapes, lt_algos_);
  if (!ev.ok()) return ev.status();
  if (ev->info) info_ = ev->info;
  for (v1::LtAlgo& a : ev->tuned) {
    if (store && info_) {
      v1::Problem p;
      *p.mutable_shape() = a.shape();
      p.set_layout(a.layout());
      p.set_dtype(v1::DTYPE_F16_F32ACC);
      p.set_gpu(info_->gpu());
      p.set_arch(info_->arch());
      (void)store->PutLtAlgo(p, a.cublas_version(), LtAlgo{a.algo(), 0});
    }
    MergeTunedAlgo(lt_algos_, std::move(a));
  }
  out.measurements = std::move(ev->measurements);
  for (v1::Measurement& m : out.measurements) {
    if (info_ && m.problem().gpu().empty()) {
      m.mutable_problem()->set_gpu(info_->gpu());
      m.mutable_problem()->set_arch(info_->arch());
    }
  }
  if (store) {
    absl::StatusOr<std::vector<int64_t>> ids = store->PutMeasurements(out.measurements, job_id);
    if (!ids.ok()) return ids.status();
    out.measurement_ids = std::move(*ids);
  }
  return out;
}

void LocalWorker::LoadLtAlgos(const std::vector<v1::Shape>& shapes, v1::Layout layout,
                              Store* store) {
  if (store == nullptr || !info_) return;  // the GPU is known after the first runner
  const std::string version = CublasVersion(*info_);
  for (const v1::Shape& s : shapes) {
    // Once per problem: the stored choice goes to the first runner as one more
    // contender of a new tuning (retune), whose winner replaces it here and in
    // the store, so a choice that once lost to noise does not stay for good.
    if (!lt_looked_up_.insert(absl::StrCat(ShapeName(s), LayoutName(layout))).second) continue;
    absl::StatusOr<std::optional<LtAlgo>> stored =
        store->GetLtAlgo(MakeProblem(info_->gpu(), info_->arch(), s, layout), version);
    if (!stored.ok() || !*stored) continue;
    v1::LtAlgo a;
    *a.mutable_shape() = s;
    a.set_layout(layout);
    a.set_algo((*stored)->algo);
    a.set_cublas_version(version);
    a.set_gpu(info_->gpu());
    a.set_retune(true);
    lt_algos_.push_back(std::move(a));
  }
}

}  // namespace anvil
