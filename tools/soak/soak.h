// The soak behind anvil-soak (sandbox/SANDBOX.md, "Soak"): builds of fresh
// naive-seed candidates on options.build_jobs threads beside one GPU lane of
// evaluations (one runner at a time), passing candidates mixed with the
// hostile and broken files of tests/. Every job must get its verdict; after
// each hang or crash the next PASSED measurement is timed; device memory is
// sampled after every hostile job; at the end nothing may be left: processes,
// scratch directories, descriptors, job cgroups, device memory. Also
// measures the sandbox's own cost per build and per run.
//
// REQUIRES: a CUDA device options.device, unless options.cpu_only. Uses the
// calling thread for the GPU lane and starts the build threads itself; one
// soak per process at a time (it watches the process's own descriptors).
#ifndef ANVIL_TOOLS_SOAK_SOAK_H_
#define ANVIL_TOOLS_SOAK_SOAK_H_

#include "absl/status/statusor.h"
#include "tools/soak/options.h"
#include "tools/soak/report.h"

namespace anvil {

// Non-OK when the soak could not run at all (no toolchain, the naive seed
// does not build or pass, no scratch space); what went wrong in a job is in
// the report.
absl::StatusOr<SoakReport> RunSoak(const SoakOptions& options);

}  // namespace anvil

#endif  // ANVIL_TOOLS_SOAK_SOAK_H_
