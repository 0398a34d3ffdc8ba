// Retry policy of the official OpenAI and Anthropic SDKs, as pure functions
// of the response: what is retried and how long to wait. Internal to llm/.
#ifndef ANVIL_LLM_RETRY_H_
#define ANVIL_LLM_RETRY_H_

#include <map>
#include <optional>
#include <string>

#include "absl/time/time.h"

namespace anvil::llm {

// `x-should-retry: true|false` decides when present; else 408, 409, 429 and
// 5xx are retried. status 0 (no response: connection error, timeout) is retried.
bool ShouldRetry(long status, const std::map<std::string, std::string>& headers);

// The wait the server asks for: `retry-after-ms` (milliseconds), else
// `retry-after` as seconds or as an HTTP date (relative to `now`). nullopt
// when absent or unreadable.
std::optional<absl::Duration> RetryAfter(const std::map<std::string, std::string>& headers,
                                         absl::Time now);

// The wait before retry number `retry` (0 for the first): the server's
// RetryAfter when it is in (0, 60 s], else min(0.5 s * 2^retry, 8 s) * (1 - 0.25 u)
// with u in [0, 1).
absl::Duration RetryDelay(int retry, const std::map<std::string, std::string>& headers,
                          absl::Time now, double u);

}  // namespace anvil::llm

#endif  // ANVIL_LLM_RETRY_H_
