#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "llm/llm.h"
#include "tests/scripted_llm_server.h"

namespace anvil::llm {
namespace {

using nlohmann::json;
using testing::ErrorReply;
using testing::OpenAiReply;
using testing::OpenAiStream;
using testing::ScriptedLlmServer;
using testing::ScriptedReply;
using testing::ScriptedRequest;

// Options against `server` with recorded (not slept) waits and no jitter.
ClientOptions Against(const ScriptedLlmServer& server, std::vector<absl::Duration>* sleeps) {
  ClientOptions o;
  o.base_url = server.base_url();
  o.model = "test-model";
  o.total_timeout = absl::Seconds(5);
  o.sleep = [sleeps](absl::Duration d) { sleeps->push_back(d); };
  o.uniform = [] { return 0.0; };
  return o;
}

ChatRequest Ask(int n = 1) {
  ChatRequest r;
  r.system = "sys";
  r.messages = {{"user", "write a kernel"}};
  r.n = n;
  return r;
}

std::unique_ptr<Client> Make(ClientOptions o) {
  auto c = Client::Create(std::move(o));
  EXPECT_TRUE(c.ok()) << c.status();
  return std::move(*c);
}

TEST(Client, RetriesA429AfterTheWaitTheServerNames) {
  ScriptedLlmServer server([](const ScriptedRequest&, int i) {
    return i == 0 ? ErrorReply(429, {{"retry-after-ms", "250"}}) : OpenAiReply({"hello"}, 12, 3);
  });
  std::vector<absl::Duration> sleeps;
  ClientOptions o = Against(server, &sleeps);
  o.usd_per_prompt_token = 1e-6;
  o.usd_per_completion_token = 2e-6;
  absl::StatusOr<ChatResult> r = Make(o)->Complete(Ask());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->error, "");
  ASSERT_EQ(r->choices.size(), 1u);
  EXPECT_EQ(r->choices[0].text, "hello");
  EXPECT_EQ(r->http_requests, 2);
  EXPECT_EQ(r->retries, 1);
  EXPECT_EQ(sleeps, std::vector<absl::Duration>{absl::Milliseconds(250)});
  EXPECT_EQ(r->prompt_tokens, 12);
  EXPECT_DOUBLE_EQ(r->cost_usd, 12e-6 + 6e-6);
  json body = json::parse(server.requests()[0].body);
  EXPECT_EQ(body["model"], "test-model");
  EXPECT_EQ(server.requests()[0].path, "/v1/chat/completions");
}

TEST(Client, GivesUpOn5xxAfterTwoRetriesWithExponentialBackoff) {
  ScriptedLlmServer server([](const ScriptedRequest&, int) { return ErrorReply(500); });
  std::vector<absl::Duration> sleeps;
  absl::StatusOr<ChatResult> r = Make(Against(server, &sleeps))->Complete(Ask());
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->choices.empty());
  EXPECT_NE(r->error.find("HTTP 500"), std::string::npos) << r->error;
  EXPECT_EQ(server.request_count(), 3);
  EXPECT_EQ(sleeps, (std::vector<absl::Duration>{absl::Milliseconds(500), absl::Seconds(1)}));
}

TEST(Client, DoesNotRetryA400) {
  ScriptedLlmServer server([](const ScriptedRequest&, int) { return ErrorReply(400); });
  std::vector<absl::Duration> sleeps;
  absl::StatusOr<ChatResult> r = Make(Against(server, &sleeps))->Complete(Ask());
  EXPECT_EQ(server.request_count(), 1);
  EXPECT_NE(r->error.find("scripted 400"), std::string::npos) << r->error;
}

TEST(Client, TimesOutAndRetries) {
  ScriptedLlmServer server([](const ScriptedRequest&, int i) {
    ScriptedReply r = OpenAiReply({"late"});
    if (i == 0) r.delay = absl::Seconds(3);
    return r;
  });
  std::vector<absl::Duration> sleeps;
  ClientOptions o = Against(server, &sleeps);
  o.total_timeout = absl::Milliseconds(300);
  absl::StatusOr<ChatResult> r = Make(o)->Complete(Ask());
  EXPECT_EQ(r->error, "");
  EXPECT_EQ(r->retries, 1);
  ASSERT_EQ(r->choices.size(), 1u);
}

TEST(Client, MalformedJsonEmptyChoicesAndHugeBodiesAreErrorsNotRetried) {
  for (int kind = 0; kind < 3; ++kind) {
    ScriptedLlmServer server([kind](const ScriptedRequest&, int) {
      ScriptedReply r = OpenAiReply({});
      if (kind == 0) r.body = "{\"choices\": [ {\"message\": ";
      if (kind == 2) r = OpenAiReply({std::string(3 << 20, 'x')});
      return r;
    });
    std::vector<absl::Duration> sleeps;
    ClientOptions o = Against(server, &sleeps);
    o.max_response_bytes = 1 << 20;
    absl::StatusOr<ChatResult> r = Make(o)->Complete(Ask());
    ASSERT_TRUE(r.ok());
    EXPECT_TRUE(r->choices.empty()) << kind;
    const char* want[] = {"malformed JSON", "no choices", "exceeds"};
    EXPECT_NE(r->error.find(want[kind]), std::string::npos) << r->error;
    EXPECT_EQ(server.request_count(), 1) << kind;
  }
}

TEST(Client, FallsBackToParallelSeededRequestsWhenNIsIgnored) {
  ScriptedLlmServer server([](const ScriptedRequest& q, int i) {
    return OpenAiReply({"sample " + std::to_string(i)});  // n ignored, as Ollama does
  });
  std::vector<absl::Duration> sleeps;
  ClientOptions o = Against(server, &sleeps);
  o.seed = 100;
  std::unique_ptr<Client> client = Make(o);
  absl::StatusOr<ChatResult> r = client->Complete(Ask(4));
  ASSERT_EQ(r->choices.size(), 4u);
  EXPECT_EQ(r->error, "");
  EXPECT_EQ(server.request_count(), 4);
  std::set<int64_t> seeds;
  for (const ScriptedRequest& q : server.requests()) seeds.insert(json::parse(q.body)["seed"].get<int64_t>());
  EXPECT_EQ(seeds, (std::set<int64_t>{100, 101, 102, 103}));
  EXPECT_EQ(client->known_n_cap(), 1);
  // The next exchange asks for one at a time from the start.
  ASSERT_EQ(client->Complete(Ask(2))->choices.size(), 2u);
  EXPECT_FALSE(json::parse(server.requests()[4].body).contains("n"));
}

TEST(Client, UsesTheCapTheServerHonours) {
  ScriptedLlmServer server([](const ScriptedRequest& q, int) {
    int n = json::parse(q.body).value("n", 1);
    return OpenAiReply(std::vector<std::string>(std::min(n, 2), "k"));  // llama.cpp: slots
  });
  std::vector<absl::Duration> sleeps;
  absl::StatusOr<ChatResult> r = Make(Against(server, &sleeps))->Complete(Ask(5));
  EXPECT_EQ(r->choices.size(), 5u);
  EXPECT_EQ(server.request_count(), 3);  // 2, then 2 + 1 in parallel
}

TEST(Client, StreamsServerSentEvents) {
  ScriptedLlmServer server([](const ScriptedRequest&, int) {
    return OpenAiStream({"first answer, long enough for chunks", "second"});
  });
  std::vector<absl::Duration> sleeps;
  ClientOptions o = Against(server, &sleeps);
  o.stream = true;
  absl::StatusOr<ChatResult> r = Make(o)->Complete(Ask(2));
  ASSERT_EQ(r->choices.size(), 2u) << r->error;
  EXPECT_EQ(r->choices[0].text, "first answer, long enough for chunks");
  EXPECT_EQ(r->choices[1].finish_reason, "stop");
  EXPECT_EQ(r->completion_tokens, 9);
  EXPECT_FALSE(r->tokens_estimated);
  EXPECT_GT(r->first_token_ms, 0);
}

TEST(Client, AStreamGoneSilentHitsTheIdleTimeout) {
  ScriptedLlmServer server([](const ScriptedRequest&, int) {
    ScriptedReply r = OpenAiStream({"slow"});
    r.event_delay = absl::Seconds(4);
    return r;
  });
  std::vector<absl::Duration> sleeps;
  ClientOptions o = Against(server, &sleeps);
  o.stream = true;
  o.idle_timeout = absl::Seconds(1);
  o.max_retries = 0;
  absl::StatusOr<ChatResult> r = Make(o)->Complete(Ask());
  EXPECT_TRUE(r->choices.empty());
  EXPECT_NE(r->error.find("timed out"), std::string::npos) << r->error;
}

TEST(Client, KeepsAtMostMaxConcurrencyRequestsInFlight) {
  ScriptedLlmServer server([](const ScriptedRequest&, int) {
    ScriptedReply r = OpenAiReply({"x"});
    r.delay = absl::Milliseconds(150);
    return r;
  });
  std::vector<absl::Duration> sleeps;
  ClientOptions o = Against(server, &sleeps);
  o.max_concurrency = 2;
  std::unique_ptr<Client> client = Make(o);
  std::vector<std::thread> callers;
  for (int i = 0; i < 5; ++i) callers.emplace_back([&] { client->Complete(Ask()).IgnoreError(); });
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(server.request_count(), 5);
  EXPECT_EQ(server.max_concurrent(), 2);
}

TEST(Client, SpeaksAnthropicMessages) {
  ScriptedLlmServer server([](const ScriptedRequest&, int i) {
    ScriptedReply r;
    r.body = json{{"content", {{{"type", "text"}, {"text", "a" + std::to_string(i)}}}},
                  {"stop_reason", "end_turn"},
                  {"usage", {{"input_tokens", 5}, {"output_tokens", 2}}}}
                 .dump();
    return r;
  });
  std::vector<absl::Duration> sleeps;
  ClientOptions o = Against(server, &sleeps);
  o.provider = Provider::kAnthropic;
  o.api_key = "secret";
  absl::StatusOr<ChatResult> r = Make(o)->Complete(Ask(3));
  ASSERT_EQ(r->choices.size(), 3u);
  EXPECT_EQ(r->prompt_tokens, 15);
  ScriptedRequest q = server.requests()[0];
  EXPECT_EQ(q.path, "/v1/messages");
  EXPECT_EQ(q.headers["x-api-key"], "secret");
  EXPECT_EQ(q.headers["anthropic-version"], "2023-06-01");
  EXPECT_EQ(json::parse(q.body)["system"], "sys");
}

TEST(Client, ConnectionRefusedIsDataNotAnError) {
  std::vector<absl::Duration> sleeps;
  ClientOptions o;
  o.base_url = "http://127.0.0.1:1/v1";
  o.model = "m";
  o.sleep = [&](absl::Duration d) { sleeps.push_back(d); };
  absl::StatusOr<ChatResult> r = Make(o)->Complete(Ask());
  ASSERT_TRUE(r.ok());
  EXPECT_NE(r->error.find("connection failed"), std::string::npos) << r->error;
  EXPECT_EQ(r->http_requests, 3);
}

TEST(ParseClientOptions, ReadsTheKeyFromTheNamedVariable) {
  auto env = [](const char* name) -> const char* {
    return std::string(name) == "MY_KEY" ? "sk-1" : nullptr;
  };
  absl::StatusOr<ClientOptions> o = ParseClientOptions(
      R"({"provider":"openai","base_url":"http://h/v1","model":"m","api_key_env":"MY_KEY",)"
      R"("stream":true,"timeout_s":30,"usd_per_prompt_token":1e-7})",
      env);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->api_key, "sk-1");
  EXPECT_EQ(o->total_timeout, absl::Seconds(30));
  EXPECT_TRUE(o->stream);
  EXPECT_FALSE(ParseClientOptions(R"({"model":"m","api_key_env":"NOPE"})", env).ok());
  EXPECT_FALSE(ParseClientOptions(R"({"model":"m","temprature":1})", env).ok());
  EXPECT_FALSE(ParseClientOptions(R"({"model":"m","provider":"x"})", env).ok());
  EXPECT_FALSE(ParseClientOptions(R"({"model":"m","max_tokens":"lots"})", env).ok());
}

}  // namespace
}  // namespace anvil::llm
