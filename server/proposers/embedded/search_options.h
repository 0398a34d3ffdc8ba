// The embedded search's options and result (search.h describes the stages
// they steer). Plain structs.
#ifndef ANVIL_SERVER_PROPOSERS_EMBEDDED_SEARCH_OPTIONS_H_
#define ANVIL_SERVER_PROPOSERS_EMBEDDED_SEARCH_OPTIONS_H_

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "anvil/v1/kernel_search.pb.h"
#include "server/proposers/embedded/cost_model.h"

namespace anvil {

struct SearchOptions {
  double budget_seconds = 3600;   // wall time of this run; the verify stage runs regardless
  // What a problem's best minimises (proto/figures.h): "graph-cold" (CUDA-graph
  // replay with operands streamed from DRAM: what an inference step pays),
  // "graph-hot", "device" (one isolated call), "warm" or "call" (eager-mode
  // back-to-back or one call with host overhead), or "cold". A measurement
  // without the figure (a call that cannot be captured) is never a best. The
  // cost model always predicts device time.
  std::string figure = "graph-cold";
  // How the stages before verification measure: SCREEN (the figure above and
  // every check, baselines timed once per runner process and problem) or
  // FULL. Verification always re-measures in full.
  v1::Fidelity fidelity = v1::FIDELITY_SCREEN;
  // The stage plan scales with the budget and the number of problems: the
  // seeds stage measures at most seeds_share of what the budget can measure
  // at the rate of the fidelity above (per minute, on one GPU: what
  // bench/results/*-search-throughput-*.md measured), each problem's seed
  // configurations ranked by the cost model, at least min_seeds_per_problem each
  // (seeds_share 0: every seed configuration on every problem).
  double seeds_share = 0.35;
  double screens_per_minute = 300;
  double full_measurements_per_minute = 35;
  int min_seeds_per_problem = 4;
  int screen_per_problem = 6;     // stage 1: model-ranked configurations per problem
  int widen_per_problem = 2;      // stage 2: leaders per problem sent to other problems
  int evolve_per_problem = 4;     // stage 3: moves measured per problem per generation
  // Stage 3: at most this many generations; the patience below or the
  // budget ends it first (a cap of 6 ended a 15-minute job's search after
  // 12.4 minutes on an H100 while it still improved:
  // bench/results/2026-11-28-search-throughput-h100.md).
  int generations = 100;
  int evolve_patience = 2;        // stage 3: stops after this many generations in a row improve
                                  // no problem's best by 0.5% (each goes further down the
                                  // model's ranking of the leaders' neighbours)
  int specialise_per_problem = 2; // stage 3: general leaders per problem rebuilt for it
  // Stage 3: configurations of other tiles (family and tile size) within this
  // factor of a problem's best are leaders too: specialised, and evolved with
  // half of evolve_per_problem each, one per kind of work (one noisy
  // measurement must not decide which tile a problem's evolution explores).
  double leader_margin = 1.15;
  int evolve_runners_up = 1;      // stage 3: such runners-up evolved per problem
  int verify_runs = 3;            // stage 4: a winner's re-measurements, each in its own
                                  // runner process; the median speedup is reported
  double evolve_share = 0.3;      // stage 3: the budget's share kept from stages 0-2
  // While a round's answers are pending (the next round cannot be planned,
  // let alone built), up to this many (built configuration, problem) pairs
  // are measured meanwhile, the model's most promising first (idle_work.h;
  // 0: none). About 10 s of screens: what a round's first builds take.
  int idle_items = 48;
  int build_chunk = 64;           // builds per round (~2x parallel builds); the next round
                                  // builds while this one is measured
  double max_waste = 0.25;        // prune tiles wasting this much more than the tightest
  double max_workspace_bytes = 4.0 * (1 << 30);  // the runner's default workspace cap
  bool seeds_only = false;        // stop after stage 0
  std::string transfer_from;      // a GPU model in the store ("" = none), e.g. "H200"
  int transfer_per_problem = 3;   // its fastest distinct configurations per problem
  // A problem new to the store starts from its nearest stored problems on the
  // same GPU model (neighbours_stage.cc): this many of them at most, within
  // this distance (the sum of |log2| differences of M, N and K: 4 is, say, M
  // 16 times larger, or M, N and K each about 2.5 times), and this many of
  // each one's fastest distinct configurations (0: no neighbours stage).
  int neighbour_problems = 3;
  double neighbour_distance = 4.0;
  int neighbour_per_problem = 3;
  DeviceModel device;             // cost-model constants (sm count is taken from the GPU)
  // The clock the budget is measured on (tests pass a fake one); empty = steady_clock.
  std::function<std::chrono::steady_clock::time_point()> clock;
};

// One point of a problem's search curve: after `tried` candidates measured
// on it, the best correct speedup over the best baseline (by the search's figure).
struct CurvePoint {
  std::string problem;  // ShapeName + layout
  int tried = 0;
  double speedup = 0;
  double seconds = 0;   // since the run started
  std::string stage;
};

struct SearchResult {
  // Best verified per problem, with the figures of its re-measurement in this
  // job (best_us, best_baseline_us, speedup).
  std::vector<v1::ProblemProgress> problems;
  std::vector<CurvePoint> curve;
  int candidates_built = 0;       // built this run (cache misses and hits)
  int build_failures = 0;
  int measurements = 0;           // measured this run
  double measure_seconds = 0;     // wall time its rounds spent with the coordinator
                                  // (building and measuring)
  double wall_seconds = 0;
  bool budget_exhausted = false;
};

// Called for every event worth showing a person (one line, no newline).
using ProgressFn = std::function<void(const std::string& line)>;

}  // namespace anvil

#endif  // ANVIL_SERVER_PROPOSERS_EMBEDDED_SEARCH_OPTIONS_H_
