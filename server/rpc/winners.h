// The winners a client asks for: the store's best verified kernel per
// problem, or one job's winners with that job's own re-measurement of each
// (a job that predates those gets its winner's fastest verified measurement).
// Shared by the ListKernels RPC and `anvil kernels` in local mode, so both
// print the same. Thread-safe (the store is).
#ifndef ANVIL_SERVER_RPC_WINNERS_H_
#define ANVIL_SERVER_RPC_WINNERS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "store/store.h"

namespace anvil {

// job empty: ListBestKernels(gpu, layout, figure, limit); else the job's
// winners (gpu and layout filters still apply). NotFound for an unknown job.
absl::StatusOr<std::vector<v1::Kernel>> ListWinners(Store& store, const std::string& gpu,
                                                    v1::Layout layout, const std::string& figure,
                                                    const std::string& job, int limit);

}  // namespace anvil

#endif  // ANVIL_SERVER_RPC_WINNERS_H_
