// The one mapping between absl::Status (Anvil's errors) and grpc::Status
// (the wire). The codes are the same google.rpc.Code numbers on both sides;
// what this adds is the policy: which Anvil errors a client sees as what.
//   INVALID_ARGUMENT    a bad shape, layout, budget or request id
//   NOT_FOUND           an unknown job or kernel
//   ALREADY_EXISTS      a request id replayed with a different body
//   FAILED_PRECONDITION the job cannot do that in its state (resume a running job)
//   RESOURCE_EXHAUSTED  too many queued jobs or open streams; the disk is full
//   UNAVAILABLE         no evaluator for the problem's GPU; the server is draining
//   UNAUTHENTICATED     no or wrong bearer token
//   DEADLINE_EXCEEDED   the client's deadline passed before the answer
// Both sides of the wire use it: the KernelSearch service and its client
// (server/rpc, cli), the fleet service (server/fleet) and the worker daemon
// (worker/fleet). Part of anvil_proto_grpc: grpc types appear here only.
// Thread-safe (pure functions).
#ifndef ANVIL_PROTO_GRPC_STATUS_H_
#define ANVIL_PROTO_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace anvil::rpc {

grpc::Status ToGrpc(const absl::Status& status);
absl::Status FromGrpc(const grpc::Status& status);

}  // namespace anvil::rpc

#endif  // ANVIL_PROTO_GRPC_STATUS_H_
