// The evaluator and proposers `anvil serve` and `anvil-server` run with:
// this node's GPU (LocalEvaluator: sandboxed nvcc and runner) and the
// proposers a request names. Tests pass their doubles to ServeMain instead.
#ifndef ANVIL_SERVER_RPC_LOCAL_COMPONENTS_H_
#define ANVIL_SERVER_RPC_LOCAL_COMPONENTS_H_

#include "server/rpc/serve_main.h"

namespace anvil {

ServeComponents LocalServeComponents();

}  // namespace anvil

#endif  // ANVIL_SERVER_RPC_LOCAL_COMPONENTS_H_
