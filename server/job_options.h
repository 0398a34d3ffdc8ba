// JobOptions: how a service runs its jobs where a request is silent, and the
// coordinator's tuning. One struct, filled where a service is assembled
// (server/proposers/job_setup.h: from ServerOptions for `anvil serve` and
// local `anvil optimize` alike) and passed down unchanged to each job's run
// and to the proposers that need a value of it (the build chunk).
#ifndef ANVIL_SERVER_JOB_OPTIONS_H_
#define ANVIL_SERVER_JOB_OPTIONS_H_

#include <string>

#include "anvil/v1/kernel_search.pb.h"
#include "proto/figures.h"

namespace anvil {

struct JobOptions {
  std::string default_figure{kDefaultFigure};  // a request without reward_figure
  v1::Budget default_budget;                   // fields a request leaves zero
  // Candidates per build/measure round: enough to keep every build job busy
  // and to group a family's configurations in one compilation (worker/BUILDS.md).
  int build_chunk = 64;
  // Screens measured in one runner process at most, counted in (candidate,
  // problem) items: a batch times each problem's baselines once, so the more
  // candidates of a problem it holds the less each pays for them.
  int measure_batch = 64;
  int pending_per_proposer = 256;  // proposals asked for ahead: what the fair scheduler chooses from
  double plateau_gain = 0.005;     // a best improving less is no gain (plateau)
  // A re-check measured on another GPU than the original (a fleet) whose
  // figure differs from the original's by more than this fraction does not
  // verify, and records a disagreement against the workers involved.
  double cross_check_tolerance = 0.25;
  int quarantine_after = 3;  // disagreements (with two or more others) that quarantine a worker
};

}  // namespace anvil

#endif  // ANVIL_SERVER_JOB_OPTIONS_H_
