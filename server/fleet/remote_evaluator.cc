#include "server/fleet/remote_evaluator.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace anvil {
namespace {

// Submits every task, then waits for each; results[i] answers tasks[i].
std::vector<absl::StatusOr<v1::ReportResultRequest>> RunAll(Fleet& fleet,
                                                            const std::vector<v1::Task>& tasks,
                                                            const std::string& gpu,
                                                            absl::Duration timeout) {
  std::vector<absl::StatusOr<std::string>> ids;
  for (const v1::Task& t : tasks) ids.push_back(fleet.Submit(t, gpu));
  const absl::Time deadline = absl::Now() + timeout;
  std::vector<absl::StatusOr<v1::ReportResultRequest>> out;
  for (const absl::StatusOr<std::string>& id : ids) {
    if (!id.ok()) {
      out.push_back(id.status());
      continue;
    }
    absl::StatusOr<v1::ReportResultRequest> r = fleet.Await(*id, deadline);
    if (!r.ok() && absl::IsDeadlineExceeded(r.status())) {
      r = absl::UnavailableError(absl::StrCat("no fleet worker finished task ", *id, " in time"));
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace

std::string RemoteEvaluator::Gpu(const std::vector<v1::GpuInfo>& live) const {
  if (!options_.gpu.empty()) return options_.gpu;
  return live.empty() ? "" : live.front().model();
}

std::vector<absl::StatusOr<v1::Build>> RemoteEvaluator::Build(const std::vector<v1::Candidate>& cs) {
  std::vector<v1::Task> tasks;
  for (const v1::Candidate& c : cs) {
    v1::Task& t = tasks.emplace_back();
    t.set_kind(v1::TASK_KIND_BUILD);
    *t.mutable_candidate() = c;
    t.set_timeout_s(options_.task_timeout_s);
  }
  std::vector<absl::StatusOr<v1::Build>> out;
  for (absl::StatusOr<v1::ReportResultRequest>& r : RunAll(*fleet_, tasks, "", options_.task_timeout)) {
    if (!r.ok()) {
      out.push_back(r.status());
    } else {
      out.push_back(r->build());
    }
  }
  return out;
}

std::vector<absl::StatusOr<MeasureResult>> RemoteEvaluator::Measure(
    const std::vector<MeasureRequest>& requests) {
  const std::string gpu = Gpu(fleet_->LiveGpus());
  std::vector<absl::StatusOr<MeasureResult>> out;
  if (gpu.empty()) {
    for (size_t i = 0; i < requests.size(); ++i) {
      out.push_back(absl::UnavailableError("no GPU worker in the fleet"));
    }
    return out;
  }
  std::vector<v1::Task> tasks;
  for (const MeasureRequest& r : requests) {
    v1::Task& t = tasks.emplace_back();
    t.set_kind(v1::TASK_KIND_MEASURE);
    *t.mutable_candidate() = r.candidate;
    *t.mutable_build() = r.build;
    for (const v1::Shape& s : r.shapes) {
      v1::Problem* p = t.add_problems();
      p->set_gpu(gpu);
      p->set_arch(r.candidate.arch());
      p->set_layout(r.candidate.layout());
      *p->mutable_shape() = s;
    }
    t.set_recheck(r.recheck);
    for (const v1::LtAlgo& a : r.known_lt_algos) *t.add_known_lt_algos() = a;
    t.set_timeout_s(options_.task_timeout_s);
  }
  std::vector<absl::StatusOr<v1::ReportResultRequest>> results =
      RunAll(*fleet_, tasks, gpu, options_.task_timeout);
  for (size_t i = 0; i < results.size(); ++i) {
    if (!results[i].ok()) {
      out.push_back(results[i].status());
      continue;
    }
    if (results[i]->measurements_size() != static_cast<int>(requests[i].shapes.size())) {
      out.push_back(absl::InternalError(absl::StrCat("a worker answered ", results[i]->measurements_size(),
                                                     " of ", requests[i].shapes.size(), " shapes")));
      continue;
    }
    MeasureResult m;
    m.measurements.assign(results[i]->measurements().begin(), results[i]->measurements().end());
    m.tuned.assign(results[i]->tuned().begin(), results[i]->tuned().end());
    m.gpu_seconds = results[i]->seconds();
    out.push_back(std::move(m));
  }
  return out;
}

int RemoteEvaluator::MeasureSlots() const {
  const std::vector<v1::GpuInfo> live = fleet_->LiveGpus();
  const std::string gpu = Gpu(live);
  const auto slots =
      std::count_if(live.begin(), live.end(), [&gpu](const v1::GpuInfo& g) { return g.model() == gpu; });
  return std::max<int>(1, static_cast<int>(slots));
}

std::optional<v1::RunnerInfo> RemoteEvaluator::device() const {
  const std::vector<v1::GpuInfo> live = fleet_->LiveGpus();
  const std::string gpu = Gpu(live);
  auto g = std::find_if(live.begin(), live.end(), [&gpu](const v1::GpuInfo& x) { return x.model() == gpu; });
  if (g == live.end()) return std::nullopt;
  v1::RunnerInfo info;
  info.set_gpu(g->model());
  info.set_arch(g->arch());
  info.set_gpu_uuid(g->uuid());
  info.set_sm_count(g->sm_count());
  return info;
}

}  // namespace anvil
