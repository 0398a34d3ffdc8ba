#include "server/fleet/fleet_service.h"

#include <grpcpp/grpcpp.h>

#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "proto/grpc_status.h"

namespace anvil {
namespace {

// Runs `work` once the call is authorized; its status becomes the call's.
template <typename Work>
grpc::Status Guarded(const absl::Status& authorized, Work work) {
  if (!authorized.ok()) return rpc::ToGrpc(authorized);
  return rpc::ToGrpc(work());
}

// Copies a StatusOr's value into the response.
template <typename T>
absl::Status Into(absl::StatusOr<T> result, T* response) {
  if (!result.ok()) return result.status();
  *response = *std::move(result);
  return absl::OkStatus();
}

std::optional<std::string> AuthorizationHeader(const grpc::ServerContext& context) {
  const auto& md = context.client_metadata();
  auto it = md.find("authorization");
  if (it == md.end()) return std::nullopt;
  return std::string(it->second.data(), it->second.size());
}

}  // namespace

absl::Status FleetService::AuthorizeWorker(const grpc::ServerContext& context,
                                           const std::string& worker_id) const {
  const std::string header = AuthorizationHeader(context).value_or("");
  absl::string_view credential = header;
  if (!absl::ConsumePrefix(&credential, "Bearer ") || credential.empty()) {
    return absl::UnauthenticatedError(
        "a worker call needs `authorization: Bearer <credential>`, the credential RegisterWorker issued");
  }
  return fleet_->Authenticate(worker_id, std::string(credential));
}

grpc::Status FleetService::RegisterWorker(grpc::ServerContext* c, const v1::RegisterWorkerRequest* r,
                                          v1::RegisterWorkerResponse* out) {
  return Guarded(enrol_(AuthorizationHeader(*c)), [&] { return Into(fleet_->Register(*r), out); });
}

grpc::Status FleetService::Lease(grpc::ServerContext* c, const v1::LeaseRequest* r, v1::LeaseResponse* out) {
  return Guarded(AuthorizeWorker(*c, r->worker_id()), [&]() -> absl::Status {
    absl::StatusOr<v1::LeaseResponse> got = fleet_->Lease(*r, [c] { return c->IsCancelled(); });
    if (!got.ok()) return got.status();
    if (got->has_task() && c->IsCancelled()) {  // its caller is gone: nobody would run it
      fleet_->Unlease(got->task(), r->worker_id());
      return absl::CancelledError("the caller hung up");
    }
    *out = *std::move(got);
    return absl::OkStatus();
  });
}

grpc::Status FleetService::Heartbeat(grpc::ServerContext* c, const v1::HeartbeatRequest* r,
                                     v1::HeartbeatResponse* out) {
  return Guarded(AuthorizeWorker(*c, r->worker_id()), [&] { return Into(fleet_->Heartbeat(*r), out); });
}

grpc::Status FleetService::ReportResult(grpc::ServerContext* c, const v1::ReportResultRequest* r,
                                        v1::ReportResultResponse* out) {
  return Guarded(AuthorizeWorker(*c, r->worker_id()), [&] { return Into(fleet_->Report(*r), out); });
}

grpc::Status FleetService::PutArtifact(grpc::ServerContext* c, const v1::PutArtifactRequest* r,
                                       v1::PutArtifactResponse*) {
  return Guarded(AuthorizeWorker(*c, r->worker_id()), [&] { return fleet_->PutArtifact(r->sha256(), r->data()); });
}

grpc::Status FleetService::GetArtifact(grpc::ServerContext* c, const v1::GetArtifactRequest* r,
                                       v1::GetArtifactResponse* out) {
  return Guarded(AuthorizeWorker(*c, r->worker_id()), [&]() -> absl::Status {
    absl::StatusOr<std::string> data = fleet_->GetArtifact(r->sha256());
    if (!data.ok()) return data.status();
    out->set_data(*std::move(data));
    return absl::OkStatus();
  });
}

grpc::Status FleetService::ListWorkers(grpc::ServerContext* c, const v1::ListWorkersRequest*,
                                       v1::ListWorkersResponse* out) {
  return Guarded(operators_(AuthorizationHeader(*c)), [&] { return Into(fleet_->ListWorkers(), out); });
}

grpc::Status FleetService::ClearQuarantine(grpc::ServerContext* c, const v1::ClearQuarantineRequest* r,
                                           v1::WorkerStatus* out) {
  return Guarded(operators_(AuthorizationHeader(*c)),
                 [&] { return Into(fleet_->ClearQuarantine(r->worker_id()), out); });
}

}  // namespace anvil
