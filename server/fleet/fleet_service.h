// FleetService: the Fleet gRPC service (proto/anvil/v1/fleet.proto) over a
// Fleet, behind the same bearer-token check as KernelSearch (a worker with
// the wrong token is refused UNAUTHENTICATED). A synchronous service: Lease
// long-polls on one of gRPC's own threads, never on the callback threads of
// KernelSearch. Statuses: the Fleet's, mapped to gRPC codes.
//
// Thread-safety: gRPC calls it from many threads; the Fleet is thread-safe.
// REQUIRES: fleet and auth outlive the service.
#ifndef ANVIL_SERVER_FLEET_FLEET_SERVICE_H_
#define ANVIL_SERVER_FLEET_FLEET_SERVICE_H_

#include <functional>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "anvil/v1/fleet.grpc.pb.h"
#include "server/fleet/fleet.h"

namespace anvil {

class FleetService final : public v1::Fleet::Service {
 public:
  // check_auth: OK, or UNAUTHENTICATED, for the call's authorization header.
  using AuthCheck = std::function<absl::Status(std::optional<std::string> header)>;
  FleetService(Fleet* fleet, AuthCheck check_auth)
      : fleet_(fleet), check_auth_(std::move(check_auth)) {}

  grpc::Status RegisterWorker(grpc::ServerContext* context, const v1::RegisterWorkerRequest* request,
                              v1::RegisterWorkerResponse* response) override;
  grpc::Status Lease(grpc::ServerContext* context, const v1::LeaseRequest* request,
                     v1::LeaseResponse* response) override;
  grpc::Status Heartbeat(grpc::ServerContext* context, const v1::HeartbeatRequest* request,
                         v1::HeartbeatResponse* response) override;
  grpc::Status ReportResult(grpc::ServerContext* context, const v1::ReportResultRequest* request,
                            v1::ReportResultResponse* response) override;
  grpc::Status PutArtifact(grpc::ServerContext* context, const v1::PutArtifactRequest* request,
                           v1::PutArtifactResponse* response) override;
  grpc::Status GetArtifact(grpc::ServerContext* context, const v1::GetArtifactRequest* request,
                           v1::GetArtifactResponse* response) override;
  grpc::Status ListWorkers(grpc::ServerContext* context, const v1::ListWorkersRequest* request,
                           v1::ListWorkersResponse* response) override;
  grpc::Status ClearQuarantine(grpc::ServerContext* context, const v1::ClearQuarantineRequest* request,
                               v1::WorkerStatus* response) override;

 private:
  absl::Status Authorize(const grpc::ServerContext& context) const;

  Fleet* fleet_;
  AuthCheck check_auth_;
};

}  // namespace anvil

#endif  // ANVIL_SERVER_FLEET_FLEET_SERVICE_H_
