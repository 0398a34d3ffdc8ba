#include "llm/wire.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace anvil::llm {
namespace {

using nlohmann::json;

ChatRequest Hello() {
  ChatRequest r;
  r.system = "be brief";
  r.messages = {{"user", "hi"}};
  return r;
}

TEST(RequestBody, OpenAiCarriesSystemInlineNAndSeed) {
  ClientOptions o;
  o.model = "m";
  o.stream = true;
  json b = json::parse(RequestBody(o, Hello(), 4, 7));
  EXPECT_EQ(b["messages"][0]["role"], "system");
  EXPECT_EQ(b["messages"][1]["content"], "hi");
  EXPECT_EQ(b["n"], 4);
  EXPECT_EQ(b["seed"], 7);
  EXPECT_EQ(b["stream_options"]["include_usage"], true);
}

TEST(RequestBody, AnthropicPutsTheSystemPromptAtTheTopAndHasNoN) {
  ClientOptions o;
  o.model = "claude";
  o.provider = Provider::kAnthropic;
  json b = json::parse(RequestBody(o, Hello(), 1, 7));
  EXPECT_EQ(b["system"], "be brief");
  EXPECT_EQ(b["messages"].size(), 1u);
  EXPECT_FALSE(b.contains("n"));
  EXPECT_FALSE(b.contains("seed"));
}

TEST(ParseResponse, ReadsChoicesUsageAndErrors) {
  Parsed p = ParseResponse(Provider::kOpenAi,
                           R"({"choices":[{"index":1,"message":{"content":"b"}},)"
                           R"({"index":0,"message":{"content":"a"},"finish_reason":"stop"}],)"
                           R"("usage":{"prompt_tokens":3,"completion_tokens":5}})");
  ASSERT_EQ(p.choices.size(), 2u);
  EXPECT_EQ(p.choices[0].text, "a");
  EXPECT_EQ(p.choices[1].text, "b");
  EXPECT_EQ(p.prompt_tokens, 3);
  EXPECT_NE(ParseResponse(Provider::kOpenAi, "{not json").error, "");
  EXPECT_NE(ParseResponse(Provider::kOpenAi, R"({"error":{"message":"x"}})").error, "");
  Parsed a = ParseResponse(Provider::kAnthropic,
                           R"({"content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn",)"
                           R"("usage":{"input_tokens":4,"output_tokens":2}})");
  ASSERT_EQ(a.choices.size(), 1u);
  EXPECT_EQ(a.choices[0].text, "hi");
  EXPECT_EQ(a.completion_tokens, 2);
}

TEST(SseParser, SplitsEventsAcrossArbitraryChunks) {
  std::vector<std::pair<std::string, std::string>> got;
  SseParser p([&](const std::string& e, const std::string& d) { got.push_back({e, d}); });
  const std::string stream = ": keep-alive\r\nevent: ping\r\ndata: a\r\ndata: b\r\n\r\ndata: c\n\ndata: d";
  for (char c : stream) p.Feed(absl::string_view(&c, 1));
  p.Finish();
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0], (std::pair<std::string, std::string>{"ping", "a\nb"}));
  EXPECT_EQ(got[1].second, "c");
  EXPECT_EQ(got[2].second, "d");
}

TEST(ApplyStreamEvent, FoldsOpenAiAndAnthropicStreams) {
  Parsed o;
  EXPECT_TRUE(ApplyStreamEvent(Provider::kOpenAi, "",
                               R"({"choices":[{"index":0,"delta":{"content":"he"}}]})", o));
  EXPECT_TRUE(ApplyStreamEvent(Provider::kOpenAi, "",
                               R"({"choices":[{"index":0,"delta":{"content":"y"},"finish_reason":"length"}]})", o));
  EXPECT_FALSE(ApplyStreamEvent(Provider::kOpenAi, "", "[DONE]", o));
  EXPECT_EQ(o.choices[0].text, "hey");
  EXPECT_EQ(o.choices[0].finish_reason, "length");
  Parsed a;
  ApplyStreamEvent(Provider::kAnthropic, "message_start",
                   R"({"type":"message_start","message":{"usage":{"input_tokens":11}}})", a);
  ApplyStreamEvent(Provider::kAnthropic, "content_block_delta",
                   R"({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"ok"}})", a);
  ApplyStreamEvent(Provider::kAnthropic, "message_delta",
                   R"({"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":1}})", a);
  EXPECT_FALSE(ApplyStreamEvent(Provider::kAnthropic, "message_stop", R"({"type":"message_stop"})", a));
  EXPECT_EQ(a.choices[0].text, "ok");
  EXPECT_EQ(a.prompt_tokens, 11);
  EXPECT_EQ(a.completion_tokens, 1);
  Parsed bad;
  EXPECT_FALSE(ApplyStreamEvent(Provider::kOpenAi, "", "{oops", bad));
  EXPECT_NE(bad.error, "");
}

}  // namespace
}  // namespace anvil::llm
