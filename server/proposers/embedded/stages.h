// The embedded search's stages (search.h describes each), one file each,
// and their order. A new stage is a Stage (stage.h) in a file of its own,
// its factory here, and its place in MakeStages (stage_list.cc). Each stage
// holds its own progress (rounds planned, generations, attempts) and is
// thread-compatible.
#ifndef ANVIL_SERVER_PROPOSERS_EMBEDDED_STAGES_H_
#define ANVIL_SERVER_PROPOSERS_EMBEDDED_STAGES_H_

#include <memory>
#include <vector>

#include "server/proposers/embedded/search_options.h"
#include "server/proposers/embedded/stage.h"

namespace anvil {

// The stages a search with `options` runs, in order: probe, carry, transfer,
// neighbours, seeds, screen, widen, specialise, evolve, verify (seeds_only: probe, seeds,
// verify).
std::vector<std::unique_ptr<Stage>> MakeStages(const SearchOptions& options);

// Learns the GPU (part of every problem key) by measuring the first seed
// configuration of each layout that builds on one problem of that layout,
// then reads the store's history of the problems. Unavailable when no seed runs.
std::unique_ptr<Stage> MakeProbeStage();                 // probe_stage.cc
// Each problem's fastest configurations measured here under an earlier
// source of their family, rebuilt from today's.
std::unique_ptr<Stage> MakeCarryStage();                 // transfer_stage.cc
// Each problem's fastest configurations on options.transfer_from.
std::unique_ptr<Stage> MakeTransferStage();              // transfer_stage.cc
// For each problem new to the store, the fastest configurations of its
// nearest stored problems on this GPU model, rebuilt for it where specialised.
std::unique_ptr<Stage> MakeNeighboursStage();            // neighbours_stage.cc
std::unique_ptr<Stage> MakeSeedsStage();                 // seeds_stage.cc
std::unique_ptr<Stage> MakeScreenStage();                // screen_stage.cc
std::unique_ptr<Stage> MakeWidenStage();                 // widen_stage.cc
std::unique_ptr<Stage> MakeSpecialiseStage();            // specialise_stage.cc
std::unique_ptr<Stage> MakeEvolveStage();                // evolve_stage.cc
std::unique_ptr<Stage> MakeVerifyStage();                // verify_stage.cc

}  // namespace anvil

#endif  // ANVIL_SERVER_PROPOSERS_EMBEDDED_STAGES_H_
