// The two wire protocols: request bodies, whole responses and server-sent
// event streams of OpenAI Chat Completions and Anthropic Messages, to and
// from plain structs. Internal to llm/. Pure; thread-compatible.
#ifndef ANVIL_LLM_WIRE_H_
#define ANVIL_LLM_WIRE_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "llm/llm.h"

namespace anvil::llm {

// The JSON body of one request for n choices (Anthropic has no n: n == 1).
std::string RequestBody(const ClientOptions& options, const ChatRequest& request, int n,
                        std::optional<int64_t> seed);

// What one response (whole or streamed) carried.
struct Parsed {
  std::vector<Choice> choices;  // in index order
  int64_t prompt_tokens = -1;   // -1: not reported
  int64_t completion_tokens = -1;
  std::string error;            // malformed body or an error object from the server
};

// A whole (non-streamed) response body.
Parsed ParseResponse(Provider provider, absl::string_view body);

// Splits a server-sent event stream into (event, data) pairs as bytes arrive.
class SseParser {
 public:
  using Sink = std::function<void(const std::string& event, const std::string& data)>;
  explicit SseParser(Sink sink) : sink_(std::move(sink)) {}
  void Feed(absl::string_view bytes);
  void Finish();  // a last event without its blank line

 private:
  void Line(absl::string_view line);
  Sink sink_;
  std::string pending_, event_, data_;
  bool has_data_ = false;
};

// Folds one streamed event into `into`; returns false after "[DONE]" or a
// message_stop. Sets into.error on a malformed event or an error event.
bool ApplyStreamEvent(Provider provider, const std::string& event, const std::string& data,
                      Parsed& into);

}  // namespace anvil::llm

#endif  // ANVIL_LLM_WIRE_H_
