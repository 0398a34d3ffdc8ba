#include "server/fleet/fleet_service.h"

#include <grpcpp/grpcpp.h>

namespace anvil {
namespace {

grpc::Status ToGrpcStatus(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

// Runs `work` once the call is authorized; its status becomes the call's.
template <typename Work>
grpc::Status Guarded(const absl::Status& authorized, Work work) {
  if (!authorized.ok()) return ToGrpcStatus(authorized);
  return ToGrpcStatus(work());
}

// Copies a StatusOr's value into the response.
template <typename T>
absl::Status Into(absl::StatusOr<T> result, T* response) {
  if (!result.ok()) return result.status();
  *response = *std::move(result);
  return absl::OkStatus();
}

}  // namespace

absl::Status FleetService::Authorize(const grpc::ServerContext& context) const {
  const auto& md = context.client_metadata();
  auto it = md.find("authorization");
  std::optional<std::string> header;
  if (it != md.end()) header = std::string(it->second.data(), it->second.size());
  return check_auth_(header);
}

grpc::Status FleetService::RegisterWorker(grpc::ServerContext* c, const v1::RegisterWorkerRequest* r,
                                          v1::RegisterWorkerResponse* out) {
  return Guarded(Authorize(*c), [&] { return Into(fleet_->Register(*r), out); });
}

grpc::Status FleetService::Lease(grpc::ServerContext* c, const v1::LeaseRequest* r,
                                 v1::LeaseResponse* out) {
  return Guarded(Authorize(*c), [&] { return Into(fleet_->Lease(*r), out); });
}

grpc::Status FleetService::Heartbeat(grpc::ServerContext* c, const v1::HeartbeatRequest* r,
                                     v1::HeartbeatResponse* out) {
  return Guarded(Authorize(*c), [&] { return Into(fleet_->Heartbeat(*r), out); });
}

grpc::Status FleetService::ReportResult(grpc::ServerContext* c, const v1::ReportResultRequest* r,
                                        v1::ReportResultResponse* out) {
  return Guarded(Authorize(*c), [&] { return Into(fleet_->Report(*r), out); });
}

grpc::Status FleetService::PutArtifact(grpc::ServerContext* c, const v1::PutArtifactRequest* r,
                                       v1::PutArtifactResponse*) {
  return Guarded(Authorize(*c), [&] { return fleet_->PutArtifact(r->sha256(), r->data()); });
}

grpc::Status FleetService::GetArtifact(grpc::ServerContext* c, const v1::GetArtifactRequest* r,
                                       v1::GetArtifactResponse* out) {
  return Guarded(Authorize(*c), [&]() -> absl::Status {
    absl::StatusOr<std::string> data = fleet_->GetArtifact(r->sha256());
    if (!data.ok()) return data.status();
    out->set_data(*std::move(data));
    return absl::OkStatus();
  });
}

grpc::Status FleetService::ListWorkers(grpc::ServerContext* c, const v1::ListWorkersRequest*,
                                       v1::ListWorkersResponse* out) {
  return Guarded(Authorize(*c), [&] { return Into(fleet_->ListWorkers(), out); });
}

grpc::Status FleetService::ClearQuarantine(grpc::ServerContext* c, const v1::ClearQuarantineRequest* r,
                                           v1::WorkerStatus* out) {
  return Guarded(Authorize(*c), [&] { return Into(fleet_->ClearQuarantine(r->worker_id()), out); });
}

}  // namespace anvil
