// The embedded proposer's search (local mode): no LLM, only the seed
// families' knobs. Stages, each "compile once, measure many" (a configuration
// is built once and measured on every shape it is sent to):
//   0 carry   each problem's fastest configurations measured here with an
//             earlier source of their family, measured with today's (a
//             problem's best is always built from its family's current source);
//     transfer (with SearchOptions::transfer_from) each problem's fastest
//             configurations on another GPU model, rebuilt from today's seed
//             sources and measured here: a starting point, never a result
//             (the GPU is part of the problem key). These two go first: they
//             are the best priors the store holds, and on a GPU model new to
//             the store a short budget would otherwise end inside the seeds
//             (on an H200 the seeds took 3.5 of a run's 5 minutes);
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
// The stages run on the embedded proposer's own thread (embedded_proposer.h),
// handing each round of proposals to the coordinator (RoundChannel) and
// waiting for its observations; the coordinator builds, measures and stores.
// Everything measured goes to the store first; a rerun reads the store back
// (what was measured, the bests, the model's observations) and measures only
// what is new, so an interrupted search resumes where it stopped. (The GPU
// is part of the problem key, so each run first measures one seed on one
// problem to learn it: the one measurement a resumed run repeats.)
// Thread-compatible.
#ifndef ANVIL_SERVER_PROPOSERS_EMBEDDED_SEARCH_H_
#define ANVIL_SERVER_PROPOSERS_EMBEDDED_SEARCH_H_

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/problem.h"
#include "seeds/seeds.h"
#include "worker/candidate_evaluator.h"
#include "server/proposer.h"
#include "server/proposers/embedded/cost_model.h"
#include "store/store.h"

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
  int screen_per_problem = 6;     // stage 1: model-ranked configurations per problem
  int widen_per_problem = 2;      // stage 2: leaders per problem sent to other problems
  int evolve_per_problem = 4;     // stage 3: moves measured per problem per generation
  int generations = 6;            // stage 3: at most this many generations
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
  int build_chunk = 16;           // builds per round (~2x parallel builds); the next round
                                  // builds while this one is measured
  double max_waste = 0.25;        // prune tiles wasting this much more than the tightest
  double max_workspace_bytes = 4.0 * (1 << 30);  // the runner's default workspace cap
  bool seeds_only = false;        // stop after stage 0
  std::string transfer_from;      // a GPU model in the store ("" = none), e.g. "H200"
  int transfer_per_problem = 3;   // its fastest distinct configurations per problem
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

// The coordinator as the stages see it. Thread-safe: called from the
// search's thread while the coordinator calls the proposer.
class RoundChannel {
 public:
  virtual ~RoundChannel() = default;
  // Hands a round to the coordinator and waits for it: take(i, o) runs on
  // the caller's thread with the answer to proposals[i] as each arrives
  // (the coordinator answers round by round). Cancelled when the job goes away.
  virtual absl::Status Exchange(std::vector<Proposal> proposals,
                                const std::function<void(size_t, const Observation&)>& take) = 0;
  virtual std::optional<v1::RunnerInfo> device() const = 0;  // once a runner has started
  virtual bool final_phase() const = 0;  // the job's budget is spent: only re-checks count
  // SearchView::elapsed_seconds when the stages started (Proposal::measure_by
  // is on the view's clock; the stages count from their own start).
  virtual double elapsed_at_start() const = 0;
  virtual HistoryReader& history() = 0;
};

// The stages, on the caller's thread, over a channel (EmbeddedProposer's thread).
absl::StatusOr<SearchResult> RunStages(const std::vector<SeedFamily>& seeds,
                                       const std::vector<ShapeSpec>& problems,
                                       const std::string& job_id, RoundChannel& channel,
                                       const SearchOptions& options, const ProgressFn& progress);

// One job of the embedded proposer alone: created in `store` with id
// `job_id`, run by a JobService on `evaluator` (tests, benches; `anvil
// optimize` uses the JobService itself). REQUIRES: no job `job_id` yet.
absl::StatusOr<SearchResult> RunSearch(const std::vector<SeedFamily>& seeds,
                                       const std::vector<ShapeSpec>& problems,
                                       const std::string& job_id, CandidateEvaluator& evaluator,
                                       Store& store, const SearchOptions& options,
                                       const ProgressFn& progress);

}  // namespace anvil

#endif  // ANVIL_SERVER_PROPOSERS_EMBEDDED_SEARCH_H_
