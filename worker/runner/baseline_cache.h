// BaselineCache: what a screen measured for the vendor baselines of a
// problem, kept for the rest of the runner process. The first screen of a
// problem sets the baselines up and times them interleaved with its
// candidate; the later screens of that problem in the process copy these
// records instead of calling the baselines at all, so a batch of N
// candidates pays for the baselines once, not N times. Full measurements
// never use it: they time the baselines beside every candidate.
// Keyed by (M, N, K, layout): one protocol per process, so nothing else
// changes what the baselines measure. Not thread-safe (the runner has one
// measuring thread).
#ifndef ANVIL_WORKER_RUNNER_BASELINE_CACHE_H_
#define ANVIL_WORKER_RUNNER_BASELINE_CACHE_H_

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "anvil/v1/types.pb.h"

namespace anvil::runner {

struct CachedBaselines {
  // As Measurement.baselines: the screen's figure, kernels, the tuned
  // cuBLASLt algorithm index, each one's relative error.
  std::vector<v1::Baseline> records;
  double reference_call_us = 0;  // slowest baseline's call plus sync (ProblemStart)
  // The floor of the accuracy bound (ProblemSession::ExcessThreshold): the
  // worst vendor error beyond rounding on this problem...
  double excess_err = 0;
  // ...and each baseline's relative error, in records' order.
  std::vector<double> rel_err;
  // The baselines' entries of Measurement.profile ("<key>.<baseline name>")
  // and their part of Measurement.graph_note.
  std::map<std::string, double> profile;
  std::string graph_note;
};

class BaselineCache {
 public:
  // The entry for the problem, nullptr when none was stored. The pointer
  // stays valid until the next Put.
  const CachedBaselines* Find(int m, int n, int k, v1::Layout layout) const;
  // Stores (or replaces) the problem's entry.
  void Put(int m, int n, int k, v1::Layout layout, CachedBaselines entry);
  size_t size() const { return entries_.size(); }

 private:
  using Key = std::tuple<int, int, int, int>;
  std::map<Key, CachedBaselines> entries_;
};

}  // namespace anvil::runner

#endif  // ANVIL_WORKER_RUNNER_BASELINE_CACHE_H_
