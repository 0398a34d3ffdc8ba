// The sandbox's own cost on a node: the same nvcc build, and the same
// evaluation, with and without namespaces (bubblewrap), alternating, a few
// times each. (bench/sandbox_bench.cc measures sandbox::Run on /bin/true.)
// Runs one job at a time on the calling thread.
#ifndef ANVIL_TOOLS_SOAK_OVERHEAD_H_
#define ANVIL_TOOLS_SOAK_OVERHEAD_H_

#include <string>
#include <vector>

#include "seeds/seeds.h"
#include "worker/runner_host.h"
#include "tools/soak/report.h"
#include "worker/toolchain.h"

namespace anvil {

struct OverheadInputs {
  int reps = 0;  // per mode; 0 = measure nothing
  const Toolchain& toolchain;
  const SeedFamily& naive;
  std::string nonce;        // makes the build sources unique to this run
  std::string cache_dir;    // build cache (entries are dropped again)
  std::string scratch_dir;  // parent of the jobs' scratch directories
  RunnerHostOptions eval_none;  // the soak's settings (ceilings known) without namespaces
  // The soak's own evaluator (namespaces) and a built passing candidate;
  // null: no GPU, builds only.
  RunnerHost* eval_namespaces = nullptr;
  const v1::Candidate* candidate = nullptr;
  const v1::Build* build = nullptr;
  std::vector<v1::LtAlgo> known;
};

OverheadReport MeasureOverhead(const OverheadInputs& in);

}  // namespace anvil

#endif  // ANVIL_TOOLS_SOAK_OVERHEAD_H_
