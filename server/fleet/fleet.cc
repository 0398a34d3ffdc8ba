// Fleet: registration and credentials, leases, heartbeats, artifacts and
// the workers' list. Results: fleet_report.cc; the tasks of jobs:
// fleet_tasks.cc.
#include "server/fleet/fleet.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "proto/candidate.h"
#include "server/fleet/fleet_internal.h"

namespace anvil {

namespace fleet_internal {

bool IsHexDigest(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

int64_t NowMs() { return absl::ToUnixMillis(absl::Now()); }

}  // namespace fleet_internal

using fleet_internal::NowMs;

namespace {

std::string RandomHex(int bytes) {
  static thread_local std::mt19937_64 rng(std::random_device{}() ^
                                          static_cast<uint64_t>(absl::ToUnixNanos(absl::Now())));
  std::string out;
  for (int i = 0; i < bytes; ++i) absl::StrAppend(&out, absl::Hex(rng() & 0xff, absl::kZeroPad2));
  return out;
}

// Unquarantined and heard from within the lease.
bool Alive(const WorkerRecord& w, int64_t now_ms, int64_t lease_ms) {
  return w.quarantine_reason.empty() && now_ms - w.last_heartbeat_unix_ms <= lease_ms;
}

// Equal strings in time that does not depend on where they differ.
bool SameSecret(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

// A credential from a source no one can predict: the kernel's.
std::string NewCredential() {
  std::random_device rd;  // /dev/urandom on Linux
  std::string out;
  for (int i = 0; i < 8; ++i) absl::StrAppend(&out, absl::Hex(rd(), absl::kZeroPad8));
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Fleet>> Fleet::Create(Store* store, FleetOptions options) {
  if (options.artifact_dir.empty()) return absl::InvalidArgumentError("fleet: no artifact directory");
  if (!(options.lease_seconds > 0) || !(options.heartbeat_seconds > 0) ||
      options.heartbeat_seconds >= options.lease_seconds) {
    return absl::InvalidArgumentError(
        "fleet: need 0 < heartbeat seconds < lease seconds (a worker must renew before expiry)");
  }
  if (!(options.worker_wait_seconds >= 0) || !std::isfinite(options.worker_wait_seconds)) {
    return absl::InvalidArgumentError("fleet: worker wait seconds must be a finite number >= 0");
  }
  std::error_code ec;
  std::filesystem::create_directories(options.artifact_dir, ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("fleet: cannot create ", options.artifact_dir, ": ", ec.message()));
  }
  // Leases held when the server stopped could not be renewed while it was
  // down: their workers get a whole lease from now to come back and report.
  if (absl::StatusOr<int64_t> kept = store->ExtendLeases(static_cast<int64_t>(options.lease_seconds * 1000));
      !kept.ok()) {
    return kept.status();
  }
  return std::unique_ptr<Fleet>(new Fleet(store, std::move(options)));
}

void Fleet::Notify(Event event) {
  absl::MutexLock lock(&mu_);
  if (event == Event::kQueued) {
    ++queued_;
    queued_cv_.Signal();
  } else {
    ++results_;
    result_cv_.SignalAll();
  }
}

uint64_t Fleet::Count(Event event) {
  absl::MutexLock lock(&mu_);
  return event == Event::kQueued ? queued_ : results_;
}

void Fleet::WaitFor(Event event, uint64_t seen, absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  uint64_t& count = event == Event::kQueued ? queued_ : results_;
  absl::CondVar& cv = event == Event::kQueued ? queued_cv_ : result_cv_;
  while (count == seen && absl::Now() < deadline && !shutdown_) cv.WaitWithDeadline(&mu_, deadline);
}

void Fleet::Shutdown() {
  shutdown_ = true;
  absl::MutexLock lock(&mu_);
  queued_cv_.SignalAll();
  result_cv_.SignalAll();
}

absl::StatusOr<v1::RegisterWorkerResponse> Fleet::Register(const v1::RegisterWorkerRequest& r) {
  if (r.hostname().empty()) return absl::InvalidArgumentError("RegisterWorker: hostname is empty");
  WorkerRecord w;
  // The same node (host and GPU UUIDs) registers under the same id again, so
  // a quarantine outlives a restart of the worker.
  std::string node = r.hostname();
  for (const v1::GpuInfo& g : r.gpus()) absl::StrAppend(&node, "/", g.uuid());
  w.id = absl::StrCat(r.hostname(), "-", Sha256Hex(node).substr(0, 8));
  w.hostname = r.hostname();
  w.gpus.assign(r.gpus().begin(), r.gpus().end());
  w.build_jobs = r.build_jobs();
  w.versions = r.versions();
  const std::string credential = NewCredential();
  w.credential_sha256 = Sha256Hex(credential);
  if (absl::Status st = store_->UpsertWorker(w); !st.ok()) return st;
  v1::RegisterWorkerResponse out;
  out.set_worker_id(w.id);
  out.set_lease_timeout_s(options_.lease_seconds);
  out.set_heartbeat_interval_s(options_.heartbeat_seconds);
  out.set_credential(credential);
  Notify(Event::kQueued);  // a new worker may take what waited for it
  return out;
}

absl::Status Fleet::Authenticate(const std::string& worker_id, const std::string& credential) {
  absl::StatusOr<WorkerRecord> w = store_->GetWorker(worker_id);
  if (!w.ok()) {
    if (!absl::IsNotFound(w.status())) return w.status();
    return absl::NotFoundError(absl::StrCat("unknown worker ", worker_id, "; register again"));
  }
  if (w->credential_sha256.empty() || !SameSecret(Sha256Hex(credential), w->credential_sha256)) {
    return absl::UnauthenticatedError(absl::StrCat(
        "the credential is not worker ", worker_id, "'s (it registered again since?); register again"));
  }
  return absl::OkStatus();
}

absl::StatusOr<WorkerRecord> Fleet::LiveWorker(const std::string& worker_id) {
  absl::StatusOr<WorkerRecord> w = store_->GetWorker(worker_id);
  if (!w.ok()) return absl::NotFoundError(absl::StrCat("unknown worker ", worker_id, "; register again"));
  if (!w->quarantine_reason.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("worker ", worker_id, " is quarantined: ", w->quarantine_reason));
  }
  return w;
}

bool Fleet::BuildSlotsAlive() {
  const int64_t now = NowMs();
  if (now - build_alive_checked_ms_ < 1000) return build_alive_;
  absl::StatusOr<std::vector<WorkerRecord>> all = store_->ListWorkers();
  if (!all.ok()) return false;
  bool alive = false;
  for (const WorkerRecord& w : *all) alive = alive || (w.build_jobs > 0 && Alive(w, now, LeaseMs()));
  build_alive_ = alive;
  build_alive_checked_ms_ = now;
  return alive;
}

absl::StatusOr<v1::LeaseResponse> Fleet::Lease(const v1::LeaseRequest& r, const std::function<bool()>& gone) {
  if (!std::isfinite(r.wait_s()) || r.wait_s() < 0 || r.wait_s() > 60) {
    return absl::InvalidArgumentError("Lease: wait_s must be a number of seconds from 0 to 60");
  }
  absl::StatusOr<WorkerRecord> w = LiveWorker(r.worker_id());
  if (!w.ok()) return w.status();
  TaskLeaseRequest q;
  q.worker_id = w->id;
  q.slot = r.gpu_ordinal();
  q.lease_ms = LeaseMs();
  if (r.gpu_ordinal() >= 0) {
    for (const v1::GpuInfo& g : w->gpus) {
      if (g.ordinal() == r.gpu_ordinal()) {
        q.gpu = g.model();
        q.gpu_uuid = g.uuid();
      }
    }
    if (q.gpu.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("worker ", w->id, " registered no GPU ", r.gpu_ordinal()));
    }
  }
  if (r.gpu_ordinal() >= 0) {
    const std::vector<v1::GpuInfo> live = LiveGpus();
    q.others_alive = std::any_of(live.begin(), live.end(), [&q](const v1::GpuInfo& g) {
      return g.model() == q.gpu && g.uuid() != q.gpu_uuid;
    });
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(r.wait_s());
  while (true) {
    if (shutdown_ || (gone && gone())) return v1::LeaseResponse();
    const uint64_t seen = Count(Event::kQueued);
    q.take_builds = r.gpu_ordinal() < 0 || !BuildSlotsAlive();
    absl::StatusOr<std::optional<TaskRecord>> t = store_->LeaseTask(q);
    if (!t.ok()) return t.status();
    v1::LeaseResponse out;
    if (t->has_value()) {
      if (!out.mutable_task()->ParseFromString((*t)->payload)) {
        return absl::DataLossError(absl::StrCat("task ", (*t)->id, " has an unreadable payload"));
      }
      out.mutable_task()->set_task_id((*t)->id);
      out.mutable_task()->set_attempt((*t)->attempt);
      out.mutable_task()->set_job_id((*t)->job_id);
      return out;
    }
    if (absl::Now() >= deadline) return out;
    // Wake on a queue change, or poll now and then (a lease may expire, the
    // caller may hang up).
    WaitFor(Event::kQueued, seen, std::min(deadline, absl::Now() + absl::Milliseconds(250)));
  }
}

void Fleet::Unlease(const v1::Task& task, const std::string& worker_id) {
  absl::StatusOr<bool> released = store_->ReleaseTask(task.task_id(), task.attempt(), worker_id);
  if (released.ok() && *released) Notify(Event::kQueued);
}

absl::StatusOr<v1::HeartbeatResponse> Fleet::Heartbeat(const v1::HeartbeatRequest& r) {
  std::vector<std::string> ids(r.task_ids().begin(), r.task_ids().end());
  absl::StatusOr<std::vector<std::string>> lost = store_->RenewLeases(r.worker_id(), ids, LeaseMs());
  if (!lost.ok()) return lost.status();
  v1::HeartbeatResponse out;
  for (const std::string& id : *lost) out.add_cancelled_task_ids(id);
  return out;
}

absl::Status Fleet::PutArtifact(const std::string& sha256, const std::string& data) {
  if (!fleet_internal::IsHexDigest(sha256)) return absl::InvalidArgumentError("artifact digest is not hex SHA-256");
  if (static_cast<int64_t>(data.size()) > options_.max_artifact_bytes) {
    return absl::InvalidArgumentError("artifact larger than the fleet's limit");
  }
  if (Sha256Hex(data) != sha256) {
    return absl::InvalidArgumentError("artifact bytes do not hash to the digest given");
  }
  const std::string path = absl::StrCat(options_.artifact_dir, "/", sha256);
  if (std::filesystem::exists(path)) return absl::OkStatus();
  const std::string tmp = absl::StrCat(path, ".tmp.", RandomHex(4));
  {
    std::ofstream out(tmp, std::ios::binary);
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
    out.flush();
    if (!out) {
      std::filesystem::remove(tmp);
      return absl::ResourceExhaustedError(absl::StrCat("cannot write artifact ", tmp));
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return absl::ResourceExhaustedError(absl::StrCat("cannot store artifact: ", ec.message()));
  return absl::OkStatus();
}

absl::StatusOr<std::string> Fleet::GetArtifact(const std::string& sha256) {
  if (!fleet_internal::IsHexDigest(sha256)) return absl::InvalidArgumentError("artifact digest is not hex SHA-256");
  std::ifstream in(absl::StrCat(options_.artifact_dir, "/", sha256), std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("no artifact ", sha256));
  std::stringstream ss;
  ss << in.rdbuf();
  std::string data = ss.str();
  if (Sha256Hex(data) != sha256) return absl::DataLossError(absl::StrCat("artifact ", sha256, " is corrupt"));
  return data;
}

absl::StatusOr<v1::ListWorkersResponse> Fleet::ListWorkers() {
  absl::StatusOr<std::vector<WorkerRecord>> all = store_->ListWorkers();
  if (!all.ok()) return all.status();
  v1::ListWorkersResponse out;
  const int64_t now = NowMs();
  for (const WorkerRecord& w : *all) {
    v1::WorkerStatus* s = out.add_workers();
    s->set_worker_id(w.id);
    s->set_hostname(w.hostname);
    for (const v1::GpuInfo& g : w.gpus) *s->add_gpus() = g;
    s->set_state(!w.quarantine_reason.empty() ? "quarantined"
                 : now - w.last_heartbeat_unix_ms > LeaseMs() ? "dead" : "alive");
    s->set_quarantine_reason(w.quarantine_reason);
    s->set_builds(w.builds);
    s->set_builds_per_minute(w.build_seconds > 0 ? 60.0 * w.builds / w.build_seconds : 0);
    s->set_measures(w.measures);
    s->set_measures_per_minute(w.measure_seconds > 0 ? 60.0 * w.measures / w.measure_seconds : 0);
    s->set_last_heartbeat_age_s((now - w.last_heartbeat_unix_ms) / 1000.0);
    s->set_build_slots(w.build_jobs);
    s->set_disagreements(w.disagreements);
    s->set_last_evidence(w.last_evidence);
  }
  return out;
}

absl::StatusOr<v1::WorkerStatus> Fleet::ClearQuarantine(const std::string& worker_id) {
  if (absl::Status st = store_->ClearQuarantine(worker_id); !st.ok()) return st;
  absl::StatusOr<v1::ListWorkersResponse> all = ListWorkers();
  if (!all.ok()) return all.status();
  for (const v1::WorkerStatus& w : all->workers()) {
    if (w.worker_id() == worker_id) return w;
  }
  return absl::NotFoundError(absl::StrCat("no worker ", worker_id));
}

std::vector<WorkerRecord> Fleet::Workers() {
  absl::StatusOr<std::vector<WorkerRecord>> all = store_->ListWorkers();
  return all.ok() ? *std::move(all) : std::vector<WorkerRecord>();
}

std::vector<v1::GpuInfo> Fleet::LiveGpus() {
  std::vector<v1::GpuInfo> gpus;
  const int64_t now = NowMs();
  for (const WorkerRecord& w : Workers()) {
    if (Alive(w, now, LeaseMs())) gpus.insert(gpus.end(), w.gpus.begin(), w.gpus.end());
  }
  return gpus;
}

}  // namespace anvil
