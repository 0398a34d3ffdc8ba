// Parses ptxas's -v report (registers, shared memory, spills, stack frame
// per kernel) out of nvcc's output. Pure functions; thread-safe.
#ifndef ANVIL_WORKER_PTXAS_H_
#define ANVIL_WORKER_PTXAS_H_

#include <vector>

#include "absl/strings/string_view.h"
#include "anvil/v1/types.pb.h"

namespace anvil {

// One KernelUsage per "Compiling entry function" seen, in order. Lines that
// are not part of the report are ignored.
std::vector<v1::KernelUsage> ParsePtxasReport(absl::string_view output);

}  // namespace anvil

#endif  // ANVIL_WORKER_PTXAS_H_
