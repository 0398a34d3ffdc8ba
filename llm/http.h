// One HTTP POST through libcurl, for the LLM client: timeouts, streamed
// bodies, cancellation, lower-cased response headers. Internal to llm/.
// Thread-safe (each call has its own easy handle).
#ifndef ANVIL_LLM_HTTP_H_
#define ANVIL_LLM_HTTP_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace anvil::llm {

struct HttpLimits {
  absl::Duration connect_timeout = absl::Seconds(10);
  absl::Duration total_timeout = absl::Seconds(600);
  absl::Duration idle_timeout = absl::ZeroDuration();  // zero: no idle limit
};

struct HttpResponse {
  long status = 0;                             // 0 when no response arrived
  std::map<std::string, std::string> headers;  // names lower-cased; last one wins
  std::string body;                            // empty when on_data consumed it
  std::string transport_error;                 // curl's message; empty on success
  bool timed_out = false;                      // connect, total or idle limit hit
  bool cancelled = false;
};

// Posts `body`. With `on_data`, body bytes go to it as they arrive (and
// returning false aborts); otherwise they are collected in HttpResponse::body.
HttpResponse HttpPost(const std::string& url, const std::vector<std::string>& headers,
                      const std::string& body, const HttpLimits& limits,
                      const std::function<bool(const char*, size_t)>& on_data,
                      const std::function<bool()>& cancelled);

}  // namespace anvil::llm

#endif  // ANVIL_LLM_HTTP_H_
