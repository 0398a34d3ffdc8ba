#include "worker/local_evaluator.h"

#include <cstdlib>
#include <map>

#include "absl/strings/str_cat.h"
#include "sandbox/sandbox.h"

namespace anvil {
namespace {

sandbox::Isolation IsolationFor(const LocalEvaluatorOptions& o) {
  return o.allow_no_isolation ? sandbox::Isolation::kAuto : sandbox::Isolation::kNamespaces;
}

BuilderOptions MakeBuilderOptions(const Toolchain& toolchain, const LocalEvaluatorOptions& options) {
  BuilderOptions b;
  b.toolchain = toolchain;
  b.cache_dir = options.cache_dir;
  b.jobs = options.build_jobs;
  b.isolation = IsolationFor(options);
  return b;
}

RunnerHostOptions MakeRunnerOptions(const Toolchain& toolchain, const LocalEvaluatorOptions& options) {
  RunnerHostOptions e;
  e.toolchain = toolchain;
  e.device = options.device;
  e.protocol = options.protocol;
  e.isolation = IsolationFor(options);
  return e;
}

}  // namespace

absl::Status CheckNodeReady(const Toolchain& toolchain, const std::string& cache_dir,
                            bool allow_no_isolation) {
  const sandbox::Capabilities& caps = sandbox::Probe();
  if (!caps.namespaces && !allow_no_isolation) {
    return absl::FailedPreconditionError(absl::StrCat(
        "namespace isolation is not available here (", caps.why_not,
        "), and Anvil does not build or run untrusted kernels without it. Fix the cause "
        "(`anvil doctor` shows it), or pass --allow-no-isolation (or set "
        "ANVIL_ALLOW_NO_ISOLATION=1) to run them with process-level protections only: no "
        "private filesystem, network or pid namespace"));
  }
  const std::string bundle_fix = absl::StrCat(
      ". Jobs run as uid ", sandbox::DefaultJobUid(),
      ": unpack the bundle where every user can search, e.g. under /opt");
  struct Needed {
    std::string what, path, fix;
  };
  for (const Needed& n : std::vector<Needed>{
           {"the runner", toolchain.runner, bundle_fix},
           {"the CUTLASS headers", toolchain.cutlass_dir, bundle_fix},
           {"bubblewrap", caps.bwrap_path, bundle_fix},
           {"the CUDA toolkit", toolchain.cuda_root, ""},
           {"the scratch directories' parent", BuilderOptions().scratch_dir, ""}}) {
    if (n.path.empty()) continue;
    if (absl::Status s = sandbox::CheckReachableByJobs(n.path + "/."); !s.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(n.what, ": ", s.message(), n.fix));
    }
  }
  return PrepareBuildCacheDir(cache_dir.empty() ? DefaultBuildCacheDir() : cache_dir);
}


absl::StatusOr<std::unique_ptr<LocalEvaluator>> LocalEvaluator::Create(LocalEvaluatorOptions options) {
  absl::StatusOr<Toolchain> t = Toolchain::Find();
  if (!t.ok()) return t.status();
  if (options.cache_dir.empty()) options.cache_dir = DefaultBuildCacheDir();
  if (absl::Status s = CheckNodeReady(*t, options.cache_dir, options.allow_no_isolation); !s.ok()) {
    return s;
  }
  return std::unique_ptr<LocalEvaluator>(new LocalEvaluator(*t, options));
}

LocalEvaluator::LocalEvaluator(Toolchain toolchain, const LocalEvaluatorOptions& options)
    : builder_(MakeBuilderOptions(toolchain, options)),
      runner_(MakeRunnerOptions(toolchain, options)) {}

std::vector<absl::StatusOr<v1::Build>> LocalEvaluator::Build(const std::vector<v1::Candidate>& candidates,
                                                             const WorkContext& context) {
  return builder_.BuildAll(candidates, context.cancelled, context.built);
}

// Screens of one figure share a runner process (a batch), which a job's
// later batches reuse while it stays up; a full measurement or a re-check
// has its own, as verification needs fresh processes.
std::vector<absl::StatusOr<MeasureResult>> LocalEvaluator::Measure(
    const std::vector<MeasureRequest>& requests, const WorkContext& context) {
  std::vector<absl::StatusOr<MeasureResult>> out(requests.size(), absl::UnknownError("not measured"));
  absl::MutexLock gpu(&gpu_mu_);
  std::vector<std::vector<size_t>> batches;
  std::map<std::string, size_t> screens;  // figure -> its batch
  for (size_t i = 0; i < requests.size(); ++i) {
    const MeasureRequest& r = requests[i];
    if (r.fidelity != v1::FIDELITY_SCREEN || r.recheck) {
      batches.push_back({i});
      continue;
    }
    auto [it, fresh] = screens.emplace(r.figure, batches.size());
    if (fresh) batches.emplace_back();
    batches[it->second].push_back(i);
  }
  for (const std::vector<size_t>& batch : batches) {
    std::vector<const MeasureRequest*> part;
    for (size_t i : batch) part.push_back(&requests[i]);
    std::vector<absl::StatusOr<MeasureResult>> got = MeasureBatch(part, context);
    for (size_t k = 0; k < batch.size(); ++k) out[batch[k]] = std::move(got[k]);
  }
  return out;
}

std::vector<absl::StatusOr<MeasureResult>> LocalEvaluator::MeasureBatch(
    const std::vector<const MeasureRequest*>& requests, const WorkContext& context) {
  std::vector<BatchEntry> entries;
  for (const MeasureRequest* r : requests) {
    if (r->build.verdict() != v1::VERDICT_PASSED) {
      return std::vector<absl::StatusOr<MeasureResult>>(
          requests.size(), absl::InvalidArgumentError("measuring a candidate that did not build"));
    }
    for (const v1::LtAlgo& a : r->known_lt_algos) MergeTunedAlgo(lt_algos_, a);
    entries.push_back({r->candidate, r->build, r->shapes});
  }
  MeasureSpec spec;
  spec.fidelity = requests.front()->fidelity;
  spec.figure = requests.front()->figure;
  // A job's screens go to a runner that stays up between its batches.
  if (spec.fidelity == v1::FIDELITY_SCREEN && !requests.front()->recheck) spec.keep_warm_for = context.job_id;
  absl::StatusOr<std::vector<RunnerResults>> ev =
      runner_.MeasureBatch(entries, spec, lt_algos_, context.cancelled);
  if (!ev.ok()) return std::vector<absl::StatusOr<MeasureResult>>(requests.size(), ev.status());
  std::vector<absl::StatusOr<MeasureResult>> out;
  for (RunnerResults& one : *ev) {
    std::optional<v1::RunnerInfo> info;
    {
      absl::MutexLock lock(&mu_);
      if (one.info) info_ = one.info;
      info = info_;
    }
    MeasureResult r;
    r.gpu_seconds = one.seconds;
    for (v1::LtAlgo& a : one.tuned) {
      if (info) a.set_gpu(info->gpu());
      MergeTunedAlgo(lt_algos_, a);
      r.tuned.push_back(std::move(a));
    }
    r.measurements = std::move(one.measurements);
    for (v1::Measurement& m : r.measurements) {
      if (info && m.problem().gpu().empty()) {
        m.mutable_problem()->set_gpu(info->gpu());
        m.mutable_problem()->set_arch(info->arch());
      }
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::optional<v1::RunnerInfo> LocalEvaluator::device() const {
  absl::MutexLock lock(&mu_);
  return info_;
}

}  // namespace anvil
