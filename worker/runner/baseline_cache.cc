#include "worker/runner/baseline_cache.h"

#include <utility>

namespace anvil::runner {

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
