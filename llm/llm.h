// llm: a client for chat-completion endpoints, the LLM proposer's only way
// to a model. Two wire protocols: OpenAI-compatible Chat Completions (vLLM,
// SGLang, llama.cpp's server, Ollama, hosted APIs) and Anthropic's Messages
// API. It sends a conversation, asks for n samples, and returns every choice
// with tokens, latency and cost. Pointing it at a server: llm/LLM.md.
//
// Retries follow the official OpenAI and Anthropic SDKs: connection errors,
// timeouts, 408, 409, 429 and 5xx are retried (2 retries by default; an
// `x-should-retry` header overrides), after `retry-after-ms` or
// `Retry-After` (seconds or an HTTP date) when the server names a wait
// between 0 and 60 s, else after min(0.5 s * 2^retry, 8 s) less up to 25%
// jitter. Servers differ on `n` (llama.cpp caps it at its slot count, Ollama
// ignores it, Anthropic has none): the client counts the choices returned
// and asks for the rest in parallel requests with distinct seeds, and
// remembers the largest n the server honoured.
//
// Errors: the endpoint's failures (down, refusing, malformed JSON, no
// choices) are data in ChatResult::error, never a non-OK status: a model
// that misbehaves must not stop a job. Non-OK only for a request or
// configuration the client cannot send (InvalidArgument).
//
// Thread-safety: a Client is safe to share; at most
// ClientOptions::max_concurrency HTTP requests are in flight at once across
// all callers (the others wait).
#ifndef ANVIL_LLM_LLM_H_
#define ANVIL_LLM_LLM_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace anvil::llm {

enum class Provider {
  kOpenAi,     // POST {base_url}/chat/completions
  kAnthropic,  // POST {base_url}/messages (base_url e.g. https://api.anthropic.com/v1)
};

struct ClientOptions {
  Provider provider = Provider::kOpenAi;
  std::string base_url = "http://127.0.0.1:8080/v1";  // up to and including /v1
  std::string model;                                  // sent as "model"
  std::string api_key;  // sent as a bearer token (OpenAI) or x-api-key; empty: none
  double temperature = 0.8;
  double top_p = 0.95;
  int max_tokens = 4096;
  std::optional<int64_t> seed;  // base seed; sample i of a fallback gets seed + i
  bool stream = false;          // server-sent events
  absl::Duration connect_timeout = absl::Seconds(10);
  absl::Duration total_timeout = absl::Seconds(600);  // one HTTP request, start to end
  absl::Duration idle_timeout = absl::Seconds(60);    // streaming: longest silence
  int max_retries = 2;
  int max_concurrency = 4;  // HTTP requests in flight, all callers together
  int64_t max_response_bytes = 8 << 20;  // a longer body is cut off: an error, not retried
  double usd_per_prompt_token = 0;
  double usd_per_completion_token = 0;
  std::map<std::string, std::string> extra_headers;
  // Injected for tests; empty: the real clock, absl::SleepFor, a seeded PRNG.
  std::function<absl::Time()> now;
  std::function<void(absl::Duration)> sleep;
  std::function<double()> uniform;  // in [0, 1)
};

struct Message {
  std::string role;  // "user" or "assistant" (the system prompt is separate)
  std::string content;
};

struct ChatRequest {
  std::string system;
  std::vector<Message> messages;
  int n = 1;                    // samples wanted
  std::optional<int64_t> seed;  // overrides ClientOptions::seed
  std::function<bool()> cancelled;  // polled during transfers; true aborts
};

struct Choice {
  std::string text;
  std::string finish_reason;  // "stop", "length", "end_turn", ...
  std::optional<int64_t> seed;  // the seed of the request that produced it
};

struct ChatResult {
  std::vector<Choice> choices;  // up to n; fewer when the server failed part-way
  int64_t prompt_tokens = 0;    // summed over the requests
  int64_t completion_tokens = 0;
  bool tokens_estimated = false;  // the server sent no usage: ~4 characters a token
  double latency_ms = 0;          // the whole exchange, retries and fallbacks included
  double first_token_ms = 0;      // streaming: first content byte of the first request
  double cost_usd = 0;            // tokens times the configured prices
  int http_requests = 0;          // attempts sent, retries included
  int retries = 0;
  std::string error;               // empty when every requested sample came back
  std::vector<std::string> notes;  // e.g. "server returned 2 of 4 choices: ..."
};

class Client {
 public:
  // InvalidArgument for an empty model or base_url, or n limits below 1.
  static absl::StatusOr<std::unique_ptr<Client>> Create(ClientOptions options);
  ~Client();

  // One exchange: n samples of the conversation. REQUIRES: request.n >= 1,
  // at least one message.
  absl::StatusOr<ChatResult> Complete(const ChatRequest& request);

  // "POST <url>" of this client, for records.
  std::string endpoint() const;
  const ClientOptions& options() const { return options_; }
  // The largest n the server honoured so far (0: not known yet).
  int known_n_cap() const;

 private:
  struct Attempt;
  explicit Client(ClientOptions options);
  // One request for n choices with retries; appends to `out`.
  void Request(const ChatRequest& request, int n, std::optional<int64_t> seed, ChatResult& out);
  Attempt Send(const ChatRequest& request, int n, std::optional<int64_t> seed);
  void Fallback(const ChatRequest& request, int missing, ChatResult& result);
  void Acquire();
  void Release();

  ClientOptions options_;
  absl::Mutex mu_;
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  int n_cap_ ABSL_GUARDED_BY(mu_) = 0;
};

// Options from a JSON object (llm/LLM.md lists the keys). The API key is read
// from the environment variable named by "api_key_env" through `getenv`;
// a named variable that is unset is InvalidArgument.
absl::StatusOr<ClientOptions> ParseClientOptions(
    absl::string_view json_text,
    const std::function<const char*(const char*)>& getenv);

}  // namespace anvil::llm

#endif  // ANVIL_LLM_LLM_H_
