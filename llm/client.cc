#include <algorithm>
#include <memory>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "llm/http.h"
#include "llm/llm.h"
#include "llm/retry.h"
#include "llm/wire.h"

namespace anvil::llm {
namespace {

// ~4 characters a token: the estimate when a server reports no usage.
int64_t EstimateTokens(size_t chars) { return static_cast<int64_t>((chars + 3) / 4); }

size_t PromptChars(const ChatRequest& r) {
  size_t chars = r.system.size();
  for (const Message& m : r.messages) chars += m.content.size();
  return chars;
}

std::string Excerpt(const std::string& body) {
  return body.size() <= 300 ? body : absl::StrCat(body.substr(0, 300), "...");
}

}  // namespace

struct Client::Attempt {
  long status = 0;
  std::map<std::string, std::string> headers;
  Parsed parsed;
  std::string error;  // empty: the attempt succeeded
  bool retryable = false;
  double first_byte_ms = 0;
};

absl::StatusOr<std::unique_ptr<Client>> Client::Create(ClientOptions o) {
  if (o.model.empty()) return absl::InvalidArgumentError("the LLM client needs a model name");
  if (o.base_url.empty()) return absl::InvalidArgumentError("the LLM client needs a base URL");
  if (o.max_concurrency < 1 || o.max_retries < 0 || o.max_tokens < 1) {
    return absl::InvalidArgumentError(
        "max_concurrency and max_tokens must be at least 1, max_retries at least 0");
  }
  while (!o.base_url.empty() && o.base_url.back() == '/') o.base_url.pop_back();
  if (!o.now) o.now = [] { return absl::Now(); };
  if (!o.sleep) o.sleep = [](absl::Duration d) { absl::SleepFor(d); };
  if (!o.uniform) {
    struct Rng {
      absl::Mutex mu;
      std::mt19937_64 gen{std::random_device{}()};
    };
    auto rng = std::make_shared<Rng>();
    o.uniform = [rng] {
      absl::MutexLock lock(&rng->mu);
      return std::uniform_real_distribution<double>(0, 1)(rng->gen);
    };
  }
  return std::unique_ptr<Client>(new Client(std::move(o)));
}

Client::Client(ClientOptions options) : options_(std::move(options)) {}
Client::~Client() = default;

std::string Client::endpoint() const {
  return absl::StrCat("POST ", options_.base_url,
                      options_.provider == Provider::kAnthropic ? "/messages" : "/chat/completions");
}

int Client::known_n_cap() const {
  absl::MutexLock lock(const_cast<absl::Mutex*>(&mu_));
  return n_cap_;
}

void Client::Acquire() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](Client* c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c->mu_) {
        return c->in_flight_ < c->options_.max_concurrency;
      },
      this));
  ++in_flight_;
}

void Client::Release() {
  absl::MutexLock lock(&mu_);
  --in_flight_;
}

Client::Attempt Client::Send(const ChatRequest& request, int n, std::optional<int64_t> seed) {
  const ClientOptions& o = options_;
  const bool anthropic = o.provider == Provider::kAnthropic;
  std::vector<std::string> headers = {"Content-Type: application/json"};
  if (o.stream) headers.push_back("Accept: text/event-stream");
  if (anthropic) headers.push_back("anthropic-version: 2023-06-01");
  if (!o.api_key.empty()) {
    headers.push_back(anthropic ? absl::StrCat("x-api-key: ", o.api_key)
                                : absl::StrCat("Authorization: Bearer ", o.api_key));
  }
  for (const auto& [k, v] : o.extra_headers) headers.push_back(absl::StrCat(k, ": ", v));
  HttpLimits limits{o.connect_timeout, o.total_timeout,
                    o.stream ? o.idle_timeout : absl::ZeroDuration()};

  Attempt a;
  Parsed streamed;
  bool stream_done = false, too_big = false;
  std::string raw;
  SseParser sse([&](const std::string& event, const std::string& data) {
    if (!stream_done) stream_done = !ApplyStreamEvent(o.provider, event, data, streamed);
  });
  const absl::Time start = o.now();
  auto on_data = [&](const char* data, size_t size) {
    if (raw.empty() && a.first_byte_ms == 0) a.first_byte_ms = absl::ToDoubleMilliseconds(o.now() - start);
    if (static_cast<int64_t>(raw.size() + size) > o.max_response_bytes) {
      too_big = true;
      return false;
    }
    raw.append(data, size);
    if (o.stream) sse.Feed(absl::string_view(data, size));
    return true;
  };
  Acquire();
  HttpResponse r = HttpPost(absl::StrCat(endpoint().substr(5)), headers,
                            RequestBody(o, request, n, seed), limits, on_data, request.cancelled);
  Release();
  a.status = r.status;
  a.headers = r.headers;
  if (too_big) {
    a.error = absl::StrCat("response exceeds ", o.max_response_bytes, " bytes; cut off");
    return a;
  }
  if (r.cancelled) {
    a.error = "cancelled";
    return a;
  }
  if (!r.transport_error.empty() && !stream_done) {
    a.status = 0;
    a.error = absl::StrCat(r.timed_out ? "timed out: " : "connection failed: ", r.transport_error);
    a.retryable = true;
    return a;
  }
  if (r.status < 200 || r.status >= 300) {
    a.error = absl::StrCat("HTTP ", r.status, ": ", Excerpt(r.body));
    a.retryable = ShouldRetry(r.status, r.headers);
    return a;
  }
  if (o.stream) sse.Finish();
  const bool is_sse = o.stream && r.headers["content-type"].find("event-stream") != std::string::npos;
  a.parsed = is_sse ? std::move(streamed) : ParseResponse(o.provider, raw);
  a.error = a.parsed.error;
  return a;
}

void Client::Request(const ChatRequest& request, int n, std::optional<int64_t> seed,
                     ChatResult& out) {
  for (int retry = 0;; ++retry) {
    Attempt a = Send(request, n, seed);
    ++out.http_requests;
    if (out.first_token_ms == 0) out.first_token_ms = a.first_byte_ms;
    if (a.error.empty()) {
      size_t chars = 0;
      for (Choice& c : a.parsed.choices) {
        c.seed = seed;
        chars += c.text.size();
        out.choices.push_back(std::move(c));
      }
      const bool estimate = a.parsed.prompt_tokens < 0 || a.parsed.completion_tokens < 0;
      out.tokens_estimated |= estimate;
      out.prompt_tokens += a.parsed.prompt_tokens >= 0 ? a.parsed.prompt_tokens
                                                       : EstimateTokens(PromptChars(request));
      out.completion_tokens +=
          a.parsed.completion_tokens >= 0 ? a.parsed.completion_tokens : EstimateTokens(chars);
      return;
    }
    const bool cancelled = request.cancelled && request.cancelled();
    if (!a.retryable || retry >= options_.max_retries || cancelled) {
      if (!out.error.empty()) out.error += "; ";
      absl::StrAppend(&out.error, a.error,
                      retry > 0 ? absl::StrCat(" (after ", retry, " retries)") : "");
      return;
    }
    ++out.retries;
    options_.sleep(RetryDelay(retry, a.headers, options_.now(), options_.uniform()));
  }
}

// Asks for `missing` more choices in parallel requests, each with its own
// seed and at most the n the server is known to honour.
void Client::Fallback(const ChatRequest& request, int missing, ChatResult& result) {
  const int per = std::max(1, options_.provider == Provider::kAnthropic ? 1 : known_n_cap());
  const int requests = (missing + per - 1) / per;
  std::optional<int64_t> base = request.seed.has_value() ? request.seed : options_.seed;
  const int64_t seed0 = base.value_or(static_cast<int64_t>(options_.uniform() * (1LL << 31)));
  std::vector<ChatResult> parts(requests);
  std::vector<std::thread> threads;
  for (int i = 0; i < requests; ++i) {
    const int n = std::min(per, missing - i * per);
    threads.emplace_back([&, i, n] { Request(request, n, seed0 + 1 + i, parts[i]); });
  }
  for (std::thread& t : threads) t.join();
  for (ChatResult& p : parts) {
    for (Choice& c : p.choices) result.choices.push_back(std::move(c));
    result.prompt_tokens += p.prompt_tokens;
    result.completion_tokens += p.completion_tokens;
    result.tokens_estimated |= p.tokens_estimated;
    result.http_requests += p.http_requests;
    result.retries += p.retries;
    if (!p.error.empty()) absl::StrAppend(&result.error, result.error.empty() ? "" : "; ", p.error);
  }
  result.notes.push_back(absl::StrCat(requests, " parallel request(s) with seeds ", seed0 + 1, "..",
                                      seed0 + requests, " for ", missing, " more choice(s)"));
}

absl::StatusOr<ChatResult> Client::Complete(const ChatRequest& request) {
  if (request.n < 1 || request.messages.empty()) {
    return absl::InvalidArgumentError("a chat request needs n >= 1 and at least one message");
  }
  const absl::Time start = options_.now();
  ChatResult result;
  const bool anthropic = options_.provider == Provider::kAnthropic;
  const int cap = known_n_cap();
  const int first = anthropic ? 1 : (cap > 0 ? std::min(cap, request.n) : request.n);
  Request(request, first, request.seed.has_value() ? request.seed : options_.seed, result);
  const int got = static_cast<int>(result.choices.size());
  if (got == 0 && result.error.empty()) result.error = "the server returned no choices";
  if (got > 0 && !anthropic) {
    absl::MutexLock lock(&mu_);
    n_cap_ = got < first ? got : std::max(n_cap_, got);
  }
  if (got > 0 && got < first) {
    result.notes.push_back(absl::StrCat("server returned ", got, " of ", first, " choices"));
  }
  if (got > 0 && got < request.n) Fallback(request, request.n - got, result);
  if (result.choices.size() > static_cast<size_t>(request.n)) result.choices.resize(request.n);
  if (static_cast<int>(result.choices.size()) == request.n) result.error.clear();
  result.latency_ms = absl::ToDoubleMilliseconds(options_.now() - start);
  result.cost_usd = result.prompt_tokens * options_.usd_per_prompt_token +
                    result.completion_tokens * options_.usd_per_completion_token;
  return result;
}

}  // namespace anvil::llm
