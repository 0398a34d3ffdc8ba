#include "server/fleet/remote_evaluator.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "server/fleet/fleet_internal.h"
#include "spdlog/spdlog.h"

namespace anvil {
namespace {

// Submits every task, then waits for each; results[i] answers tasks[i].
std::vector<absl::StatusOr<v1::ReportResultRequest>> RunAll(Fleet& fleet, const std::vector<v1::Task>& tasks,
                                                            const std::vector<std::vector<std::string>>& avoid,
                                                            const std::string& gpu, absl::Duration timeout,
                                                            const WorkContext& context) {
  std::vector<absl::StatusOr<std::string>> ids;
  for (size_t i = 0; i < tasks.size(); ++i) ids.push_back(fleet.Submit(tasks[i], gpu, context.job_id, avoid[i]));
  const absl::Time deadline = absl::Now() + timeout;
  std::vector<absl::StatusOr<v1::ReportResultRequest>> out;
  for (const absl::StatusOr<std::string>& id : ids) {
    if (!id.ok()) {
      out.push_back(id.status());
      continue;
    }
    absl::StatusOr<v1::ReportResultRequest> r = fleet.Await(*id, deadline, context);
    if (!r.ok() && absl::IsDeadlineExceeded(r.status())) {
      r = absl::UnavailableError(absl::StrCat("no fleet worker finished task ", *id, " in time"));
    }
    out.push_back(std::move(r));
  }
  return out;
}

absl::Status NoModel() {
  return absl::UnavailableError(
      "no GPU worker has registered with this fleet and fleet.gpu is not set, so no job can be "
      "measured: start `anvil worker --server HOST:PORT` on a GPU node (or set fleet.gpu to the "
      "model jobs should wait for)");
}

}  // namespace

std::string RemoteEvaluator::Model() const {
  if (!options_.gpu.empty()) return options_.gpu;
  const std::vector<v1::GpuInfo> live = fleet_->LiveGpus();
  if (!live.empty()) return live.front().model();
  // Nobody live: the model of the GPU worker heard from last.
  std::string model;
  int64_t latest = -1;
  for (const WorkerRecord& w : fleet_->Workers()) {
    if (!w.gpus.empty() && w.last_heartbeat_unix_ms > latest) {
      latest = w.last_heartbeat_unix_ms;
      model = w.gpus.front().model();
    }
  }
  return model;
}

absl::Status RemoteEvaluator::CanRun(const std::string& gpu) const {
  const std::string model = Model();
  if (model.empty()) return NoModel();
  if (!gpu.empty() && gpu != model) {
    return absl::UnavailableError(absl::StrCat("no evaluator for GPU ", gpu, " here: this fleet measures on ",
                                               model, options_.gpu.empty() ? " (its GPU workers' model)" : " (fleet.gpu)"));
  }
  return absl::OkStatus();
}

std::vector<absl::StatusOr<v1::Build>> RemoteEvaluator::Build(const std::vector<v1::Candidate>& cs,
                                                              const WorkContext& context) {
  std::vector<v1::Task> tasks;
  for (const v1::Candidate& c : cs) {
    v1::Task& t = tasks.emplace_back();
    t.set_kind(v1::TASK_KIND_BUILD);
    *t.mutable_candidate() = c;
    t.set_timeout_s(options_.task_timeout_s);
  }
  std::vector<absl::StatusOr<v1::Build>> out;
  const std::vector<std::vector<std::string>> avoid(tasks.size());
  for (absl::StatusOr<v1::ReportResultRequest>& r :
       RunAll(*fleet_, tasks, avoid, "", options_.task_timeout, context)) {
    if (!r.ok()) {
      out.push_back(r.status());
    } else {
      out.push_back(r->build());
    }
  }
  return out;
}

std::vector<absl::StatusOr<MeasureResult>> RemoteEvaluator::Measure(const std::vector<MeasureRequest>& requests,
                                                                    const WorkContext& context) {
  const std::string gpu = Model();
  std::vector<absl::StatusOr<MeasureResult>> out;
  if (gpu.empty()) return std::vector<absl::StatusOr<MeasureResult>>(requests.size(), NoModel());
  const std::optional<v1::RunnerInfo> facts = device();
  std::vector<v1::Task> tasks;
  std::vector<std::vector<std::string>> avoid;
  for (const MeasureRequest& r : requests) {
    v1::Task& t = tasks.emplace_back();
    t.set_kind(v1::TASK_KIND_MEASURE);
    *t.mutable_candidate() = r.candidate;
    *t.mutable_build() = r.build;
    for (const v1::Shape& s : r.shapes) {
      v1::Problem* p = t.add_problems();
      p->set_gpu(gpu);
      p->set_arch(facts ? facts->arch() : r.candidate.arch());
      p->set_layout(r.candidate.layout());
      p->set_dtype(v1::DTYPE_F16_F32ACC);
      *p->mutable_shape() = s;
    }
    t.set_recheck(r.recheck);
    t.set_fidelity(r.fidelity);
    t.set_figure(r.figure);
    for (const v1::LtAlgo& a : r.known_lt_algos) *t.add_known_lt_algos() = a;
    t.set_timeout_s(options_.task_timeout_s);
    avoid.push_back(r.recheck ? r.measured_by : std::vector<std::string>());
  }
  std::vector<absl::StatusOr<v1::ReportResultRequest>> results =
      RunAll(*fleet_, tasks, avoid, gpu, options_.task_timeout, context);
  for (size_t i = 0; i < results.size(); ++i) {
    if (!results[i].ok()) {
      out.push_back(results[i].status());
      continue;
    }
    // The Fleet refused any result whose measurements do not answer the task.
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
  const std::string gpu = Model();
  const auto slots =
      std::count_if(live.begin(), live.end(), [&gpu](const v1::GpuInfo& g) { return g.model() == gpu; });
  return std::max<int>(1, static_cast<int>(slots));
}

std::optional<v1::RunnerInfo> RemoteEvaluator::device() const {
  const std::string gpu = Model();
  if (gpu.empty()) return std::nullopt;
  for (const WorkerRecord& w : fleet_->Workers()) {
    for (const v1::GpuInfo& g : w.gpus) {
      if (g.model() != gpu) continue;
      v1::RunnerInfo info;
      info.set_gpu(g.model());
      info.set_arch(g.arch());
      info.set_gpu_uuid(g.uuid());
      info.set_sm_count(g.sm_count());
      info.set_versions(w.versions);
      return info;
    }
  }
  return std::nullopt;
}

void RemoteEvaluator::JobStarting(const std::string& job_id) {
  if (absl::Status st = fleet_->ParkJob(job_id); !st.ok()) {
    spdlog::warn("fleet: parking the earlier tasks of job {}: {}", job_id, std::string(st.message()));
  }
}

void RemoteEvaluator::JobStopped(const std::string& job_id, bool ended) {
  if (!ended) return;  // a drain: its tasks stay for the run that resumes it
  if (absl::Status st = fleet_->CancelJob(job_id); !st.ok()) {
    spdlog::warn("fleet: cancelling the tasks of job {}: {}", job_id, std::string(st.message()));
  }
}

std::string RemoteEvaluator::Waiting() const {
  const std::string gpu = Model();
  if (gpu.empty()) return "no GPU worker has registered with the fleet";
  const int64_t until = fleet_->AbleUntilMs("measure", gpu);
  if (until >= fleet_internal::NowMs()) return "";
  // The same words for the whole wait (the job says it once): when the last
  // worker of the model was declared dead, not how long ago.
  return absl::StrFormat("no live GPU worker of model %s in the fleet%s; waiting up to %.0f s for one "
                         "(fleet.worker_wait_seconds)",
                         gpu,
                         until > 0 ? absl::StrCat(" since ", absl::FormatTime("%H:%M:%S UTC", absl::FromUnixMillis(until),
                                                                               absl::UTCTimeZone()))
                                   : "",
                         fleet_->options().worker_wait_seconds);
}

}  // namespace anvil
