// The evaluator and proposers `anvil serve` and `anvil-server` run with:
// this node's GPU (LocalEvaluator: sandboxed nvcc and runner; with
// fleet.enabled the fleet's RemoteEvaluator instead) and the proposers local
// `anvil optimize` runs (server/proposers/factory.h: the embedded search over
// the bundle's seeds, plus the LLM proposer with jobs.llm_config). Tests pass
// their doubles to ServeMain instead.
#ifndef ANVIL_SERVER_RPC_LOCAL_COMPONENTS_H_
#define ANVIL_SERVER_RPC_LOCAL_COMPONENTS_H_

#include "server/rpc/serve_main.h"

namespace anvil {

ServeComponents LocalServeComponents();

}  // namespace anvil

#endif  // ANVIL_SERVER_RPC_LOCAL_COMPONENTS_H_
