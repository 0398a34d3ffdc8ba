#include "llm/retry.h"

#include <curl/curl.h>

#include <algorithm>
#include <cmath>

#include "absl/strings/numbers.h"

namespace anvil::llm {
namespace {

const std::string* Find(const std::map<std::string, std::string>& headers, const char* name) {
  auto it = headers.find(name);
  return it == headers.end() ? nullptr : &it->second;
}

}  // namespace

bool ShouldRetry(long status, const std::map<std::string, std::string>& headers) {
  if (const std::string* h = Find(headers, "x-should-retry")) {
    if (*h == "true") return true;
    if (*h == "false") return false;
  }
  return status == 0 || status == 408 || status == 409 || status == 429 || status >= 500;
}

std::optional<absl::Duration> RetryAfter(const std::map<std::string, std::string>& headers,
                                         absl::Time now) {
  double value = 0;
  if (const std::string* ms = Find(headers, "retry-after-ms"); ms && absl::SimpleAtod(*ms, &value)) {
    return absl::Milliseconds(value);
  }
  const std::string* h = Find(headers, "retry-after");
  if (h == nullptr) return std::nullopt;
  if (absl::SimpleAtod(*h, &value)) return absl::Seconds(value);
  time_t date = curl_getdate(h->c_str(), nullptr);
  if (date < 0) return std::nullopt;
  return absl::FromTimeT(date) - now;
}

absl::Duration RetryDelay(int retry, const std::map<std::string, std::string>& headers,
                          absl::Time now, double u) {
  std::optional<absl::Duration> asked = RetryAfter(headers, now);
  if (asked.has_value() && *asked > absl::ZeroDuration() && *asked <= absl::Seconds(60)) {
    return *asked;
  }
  double seconds = std::min(0.5 * std::pow(2.0, std::min(retry, 1000)), 8.0);
  return absl::Seconds(std::max(0.0, seconds * (1 - 0.25 * u)));
}

}  // namespace anvil::llm
