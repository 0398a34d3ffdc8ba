// The components `anvil serve` and `anvil-server` run with: this node's GPU
// (LocalEvaluator: sandboxed nvcc and runner; with fleet.enabled ServeMain
// measures on the fleet's RemoteEvaluator instead) and no proposers of their
// own, so that ServeMain makes the node's, as local `anvil optimize` runs
// (server/proposers/factory.h). Tests pass their doubles to ServeMain instead.
#ifndef ANVIL_SERVER_RPC_LOCAL_COMPONENTS_H_
#define ANVIL_SERVER_RPC_LOCAL_COMPONENTS_H_

#include "absl/status/statusor.h"
#include "server/proposers/factory.h"
#include "server/rpc/options.h"
#include "server/rpc/serve_main.h"

namespace anvil {

ServeComponents LocalServeComponents();

// The node's proposers for a server's options, as local `anvil optimize`
// makes them: the embedded search over the bundle's seeds, and the LLM
// proposer when jobs.llm_config names an endpoint (the build chunk is set
// where the service is assembled).
absl::StatusOr<ProposerSetupOptions> NodeProposers(const ServerOptions& o);

}  // namespace anvil

#endif  // ANVIL_SERVER_RPC_LOCAL_COMPONENTS_H_
