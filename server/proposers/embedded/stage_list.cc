#include "server/proposers/embedded/stages.h"

namespace anvil {

std::vector<std::unique_ptr<Stage>> MakeStages(const SearchOptions& options) {
  std::vector<std::unique_ptr<Stage>> stages;
  stages.push_back(MakeProbeStage());
  if (!options.seeds_only) {
    // The best priors the store holds go before the seeds, so a short budget
    // still measures them.
    stages.push_back(MakeCarryStage());
    if (!options.transfer_from.empty()) stages.push_back(MakeTransferStage());
    stages.push_back(MakeNeighboursStage());
  }
  stages.push_back(MakeSeedsStage());
  if (!options.seeds_only) {
    stages.push_back(MakeScreenStage());
    stages.push_back(MakeWidenStage());
    stages.push_back(MakeSpecialiseStage());
    stages.push_back(MakeEvolveStage());
  }
  stages.push_back(MakeVerifyStage());
  return stages;
}

}  // namespace anvil
