#include "proto/grpc_status.h"

#include <string>

#include "spdlog/spdlog.h"

namespace anvil::rpc {

grpc::Status ToGrpc(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // DataLoss and Internal are Anvil's own failures: logged here, where the
  // operator looks, and passed on with their message (no secrets in them).
  if (absl::IsDataLoss(status) || absl::IsInternal(status) || absl::IsUnknown(status)) {
    spdlog::error("rpc failed: {}", status.ToString());
  }
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

absl::Status FromGrpc(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

}  // namespace anvil::rpc
