// FleetService: the Fleet gRPC service (proto/anvil/v1/fleet.proto) over a
// Fleet. Three kinds of caller, three checks:
//   RegisterWorker                  the enrolment token (`fleet.enrolment_token_file`,
//                                   else the API's bearer token)
//   ListWorkers, ClearQuarantine    the API's bearer token (operators)
//   Lease, Heartbeat, ReportResult, the worker's own credential, issued at its
//   PutArtifact, GetArtifact        registration: `authorization: Bearer <credential>`
//                                   for the worker_id the request names
// A wrong secret is refused UNAUTHENTICATED, an unknown worker NOT_FOUND
// (both tell the worker to register again). A synchronous service: Lease
// long-polls on one of gRPC's own threads, never on the callback threads of
// KernelSearch, and gives up when its caller hangs up (a task leased as the
// call ends is queued again). Statuses: the Fleet's, mapped to gRPC codes.
//
// Thread-safety: gRPC calls it from many threads; the Fleet is thread-safe.
// REQUIRES: fleet and the checks outlive the service.
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
  // OK, or UNAUTHENTICATED, for the call's authorization header.
  using AuthCheck = std::function<absl::Status(std::optional<std::string> header)>;
  FleetService(Fleet* fleet, AuthCheck enrol, AuthCheck operators)
      : fleet_(fleet), enrol_(std::move(enrol)), operators_(std::move(operators)) {}

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
  // The worker's credential check for a call naming `worker_id`.
  absl::Status AuthorizeWorker(const grpc::ServerContext& context, const std::string& worker_id) const;

  Fleet* fleet_;
  AuthCheck enrol_;
  AuthCheck operators_;
};

}  // namespace anvil

#endif  // ANVIL_SERVER_FLEET_FLEET_SERVICE_H_
