#include "worker/runner/baseline_cache.h"

#include <utility>

namespace anvil::runner {

const CachedBaselines* BaselineCache::Find(int m, int n, int k, v1::Layout layout) const {
  auto it = entries_.find(Key{m, n, k, static_cast<int>(layout)});
  return it == entries_.end() ? nullptr : &it->second;
}

void BaselineCache::Put(int m, int n, int k, v1::Layout layout, CachedBaselines entry) {
  entries_[Key{m, n, k, static_cast<int>(layout)}] = std::move(entry);
}

}  // namespace anvil::runner
