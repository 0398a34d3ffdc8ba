// The embedded proposer's search (local mode): no LLM, only the seed
// families' knobs. Stages, each "compile once, measure many" (a configuration
// is built once and measured on every shape it is sent to):
//   0 probe   one seed configuration of each layout measured on one problem of
//             that layout to learn the GPU (part of every problem key), then
//             the store's history of the problems read back;
//     carry   each problem's fastest configurations measured here with an
//             earlier source of their family, measured with today's (a
//             problem's best is always built from its family's current source);
//     transfer (with SearchOptions::transfer_from) each problem's fastest
//             configurations on another GPU model, rebuilt from today's seed
//             sources and measured here: a starting point, never a result
//             (the GPU is part of the problem key). These two go first: they
//             are the best priors the store holds, and on a GPU model new to
//             the store a short budget would otherwise end inside the seeds
//             (on an H200 the seeds took 3.5 of a run's 5 minutes);
//     neighbours for each problem new to the store (no measurement from an
//             earlier job), the fastest configurations of its nearest stored
//             problems on this GPU model (same layout; the cost model's shape
//             distance, within neighbour_distance), specialised ones rebuilt
//             for it: what won on a neighbouring shape is the best prior a
//             new shape has (neighbours_stage.cc says why that distance);
//     seeds   every family's default and suggested configurations on every
//             problem of their layouts whose split-K workspace fits the cap,
//             except where the same knobs were measured under an earlier
//             source of the family (the carry stage re-measured what matters);
//   1 screen  for each problem, the legal configurations (seed.json rules),
//             pruned by tile-versus-shape waste and ordered by the cost model
//             (roofline + wave quantisation, refined by nearest measured
//             neighbours); the best few per problem are measured there;
//   2 widen   successive halving over problems: the leaders of each problem
//             (top third of what it measured) are measured on the other
//             problems of their layout where the model gives them a chance;
//   3 specialise  each problem's fastest general configurations of distinct
//             tiles not yet specialised for it (within leader_margin of its
//             best), rebuilt for that problem alone (the family's shape knobs
//             set to its M, N, K: the kernel reads them as constants),
//             measured there;
//     evolve  generations of one- and two-knob moves around each problem's
//             leader and its runners-up of other tiles within leader_margin
//             (late knobs such as raster order and register split included; a
//             specialised leader's moves stay specialised), ordered by the
//             refined model (each generation takes the best not yet
//             measured), until evolve_patience generations in a row
//             improve no problem's best by 0.5%, or the budget is spent.
//             Stages 0-2 stop at (1 - evolve_share) of the budget, so stage 3
//             always has its share (a kernel edit otherwise sends a whole run
//             into re-measuring and screening, and late knobs go untried);
//   4 verify  each problem's fastest correct kernel is re-measured on fresh
//             inputs in verify_runs new runner processes (3: process-to-process
//             variation is part of the figure) and promoted (verified) only if
//             every run passes; the run of the median speedup is reported.
//             The figures reported for it are this re-measurement's: the
//             fastest of many noisy measurements is biased low (the winner's
//             curse), an independent one is not. The winner reported is the
//             fastest of the problem's verified re-measurements (the store's
//             BestKernel rule): an earlier winner may keep its place. Its
//             figures are always this job's: a winner verified by an earlier
//             job is re-measured once more here, since a speedup pairs the
//             kernel with its own process's baselines, which move between runs.
//             A best whose verified speedup falls more than 3% below its
//             screen's was chosen on a lucky screen: the next candidate whose
//             screen beats the verified figure is verified too.
// Each stage is a Stage (stage.h; stages.h lists them in order) planning
// rounds of proposals from one shared SearchState (search_state.h); the
// EmbeddedProposer (embedded_proposer.h) drives them on the coordinator's
// thread: Propose hands out a round, Observe takes in its answers, and the
// next round is planned once the last answer is in (they plan from what was
// measured). The coordinator builds, measures and stores.
// Everything measured goes to the store first; a rerun reads the store back
// (what was measured, the bests, the model's observations) and measures only
// what is new, so an interrupted search resumes where it stopped. (The GPU
// is part of the problem key, so each run first measures one seed on one
// problem to learn it: the probe, the one measurement a resumed run repeats.)
#ifndef ANVIL_SERVER_PROPOSERS_EMBEDDED_SEARCH_H_
#define ANVIL_SERVER_PROPOSERS_EMBEDDED_SEARCH_H_

#include "server/proposers/embedded/search_options.h"

#endif  // ANVIL_SERVER_PROPOSERS_EMBEDDED_SEARCH_H_
