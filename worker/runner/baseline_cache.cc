#include "worker/runner/baseline_cache.h"

#include <cmath>
#include <utility>

#include "proto/figures.h"
#include "worker/runner/protocol.h"

namespace anvil::runner {

bool BaselineCache::Usable(const v1::ScreenedBaselines& e, const v1::RunnerProtocol& p,
                           const std::string& figure) {
  if (e.figure() != figure || e.records().empty()) return false;
  for (const v1::Baseline& r : e.records()) {
    const double us = FigureUs(r.timings(), figure);
    if (!std::isfinite(us) || us <= 0) return false;
  }
  return std::isfinite(e.reference_call_us()) && e.reference_call_us() > 0 && std::isfinite(e.excess_err()) &&
         e.excess_err() >= 0 && AccuracyBound(p, e.excess_err()) <= p.rel_err_threshold();
}

BaselineCache::Key BaselineCache::KeyOf(const v1::ScreenedBaselines& e) {
  return Key{int(e.shape().m()), int(e.shape().n()), int(e.shape().k()), static_cast<int>(e.layout())};
}

const v1::ScreenedBaselines* BaselineCache::Find(int m, int n, int k, v1::Layout layout) const {
  auto it = entries_.find(Key{m, n, k, static_cast<int>(layout)});
  return it == entries_.end() ? nullptr : &it->second;
}

void BaselineCache::Put(v1::ScreenedBaselines entry, bool fresh) {
  const Key key = KeyOf(entry);
  entries_[key] = std::move(entry);
  if (fresh) fresh_.push_back(key);
}

std::vector<v1::ScreenedBaselines> BaselineCache::TakeFresh() {
  std::vector<v1::ScreenedBaselines> out;
  for (const Key& key : fresh_) {
    auto it = entries_.find(key);
    if (it != entries_.end()) out.push_back(it->second);
  }
  fresh_.clear();
  return out;
}

}  // namespace anvil::runner
