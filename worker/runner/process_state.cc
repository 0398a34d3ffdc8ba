#include "worker/runner/process_state.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace anvil::runner {

std::string DescribeChanges(const ProcessState& before, const ProcessState& after,
                            int64_t memory_tolerance) {
  std::vector<std::string> changes;
  auto shown = [](const std::map<std::string, int64_t>& m, const std::string& key) {
    auto it = m.find(key);
    return it == m.end() ? std::string("absent") : absl::StrCat(it->second);
  };
  std::map<std::string, int64_t> keys = before.values;
  keys.insert(after.values.begin(), after.values.end());
  for (const auto& [key, unused] : keys) {
    const std::string was = shown(before.values, key), now = shown(after.values, key);
    if (was != now) changes.push_back(absl::StrCat(key, " ", was, " -> ", now));
  }
  // Free memory that grew is not a hazard for the next candidate; memory
  // kept is (a candidate asking for most of the device would be refused).
  const int64_t grew = before.free_device_bytes - after.free_device_bytes;
  if (grew > memory_tolerance) {
    changes.push_back(absl::StrCat("device memory in use grew by ", grew >> 20, " MiB (",
                                   memory_tolerance >> 20, " MiB allowed)"));
  }
  return absl::StrJoin(changes, "; ");
}

}  // namespace anvil::runner
