// BaselineCache: what a screen measured for the vendor baselines of a
// problem (v1::ScreenedBaselines), kept for the rest of the runner process.
// The first screen of a problem sets the baselines up and times them
// interleaved with its candidate; the later screens of that problem in the
// process copy these records instead of calling the baselines at all, so a
// batch of N candidates pays for the baselines once, not N times. The entries
// a process stores are also emitted (RunnerEvent.screened), and the host sends
// them to its later processes on the same GPU (RunnerRequest.screened), which
// start with them here. Full measurements never use it: they time the
// baselines beside every candidate.
// Keyed by (M, N, K, layout): one protocol and figure per process, so nothing
// else changes what the baselines measure. Not thread-safe (the runner has one
// measuring thread).
#ifndef ANVIL_WORKER_RUNNER_BASELINE_CACHE_H_
#define ANVIL_WORKER_RUNNER_BASELINE_CACHE_H_

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "anvil/v1/runner.pb.h"

namespace anvil::runner {

class BaselineCache {
 public:
  // Whether an entry the host sent may stand in for timing the baselines in
  // this process (protocol `p`, defaults filled in): of the screen's
  // figure, every record with that figure, a positive reference call, and a
  // vendors' error that leaves the accuracy bound at the protocol's
  // threshold, so that no entry from another process can loosen a check.
  static bool Usable(const v1::ScreenedBaselines& e, const v1::RunnerProtocol& p,
                     const std::string& figure);
  // The entry for the problem, nullptr when none was stored. The pointer
  // stays valid until the next Put.
  const v1::ScreenedBaselines* Find(int m, int n, int k, v1::Layout layout) const;
  // Stores (or replaces) the problem's entry; `fresh`: measured in this
  // process (TakeFresh returns it), not sent by the host.
  void Put(v1::ScreenedBaselines entry, bool fresh);
  // The entries stored fresh since the last call, in the order stored.
  std::vector<v1::ScreenedBaselines> TakeFresh();
  size_t size() const { return entries_.size(); }

 private:
  using Key = std::tuple<int, int, int, int>;
  static Key KeyOf(const v1::ScreenedBaselines& e);
  std::map<Key, v1::ScreenedBaselines> entries_;
  std::vector<Key> fresh_;
};

}  // namespace anvil::runner

#endif  // ANVIL_WORKER_RUNNER_BASELINE_CACHE_H_
