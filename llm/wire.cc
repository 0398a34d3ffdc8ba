#include "llm/wire.h"

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace anvil::llm {
namespace {

using nlohmann::json;

json Messages(const ChatRequest& request, bool system_inline) {
  json messages = json::array();
  if (system_inline && !request.system.empty()) {
    messages.push_back({{"role", "system"}, {"content", request.system}});
  }
  for (const Message& m : request.messages) {
    messages.push_back({{"role", m.role}, {"content", m.content}});
  }
  return messages;
}

Choice& At(Parsed& p, size_t index) {
  if (p.choices.size() <= index) p.choices.resize(index + 1);
  return p.choices[index];
}

std::string ErrorText(const json& error) {
  if (error.is_object() && error.contains("message") && error["message"].is_string()) {
    return error["message"].get<std::string>();
  }
  return error.dump();
}

int64_t Int(const json& obj, const char* key) {
  return obj.is_object() && obj.contains(key) && obj[key].is_number_integer() ? obj[key].get<int64_t>()
                                                                             : -1;
}

std::string Str(const json& obj, const char* key) {
  return obj.is_object() && obj.contains(key) && obj[key].is_string() ? obj[key].get<std::string>()
                                                                      : "";
}

void OpenAiUsage(const json& j, Parsed& p) {
  if (!j.contains("usage") || !j["usage"].is_object()) return;
  p.prompt_tokens = Int(j["usage"], "prompt_tokens");
  p.completion_tokens = Int(j["usage"], "completion_tokens");
}

void ParseOpenAiChoices(const json& j, Parsed& p, bool delta) {
  if (!j.contains("choices") || !j["choices"].is_array()) {
    if (!delta) p.error = "response has no \"choices\" array";
    return;
  }
  for (const json& c : j["choices"]) {
    if (!c.is_object()) continue;
    size_t index = c.contains("index") && c["index"].is_number_unsigned() ? c["index"].get<size_t>()
                                                                         : p.choices.size();
    if (index > 1024) continue;  // nonsense from a broken server
    Choice& choice = At(p, index);
    const json& body = c.contains(delta ? "delta" : "message") ? c[delta ? "delta" : "message"] : json();
    choice.text += Str(body, "content");
    if (std::string f = Str(c, "finish_reason"); !f.empty()) choice.finish_reason = f;
  }
}

void ParseAnthropicMessage(const json& j, Parsed& p) {
  if (!j.contains("content") || !j["content"].is_array()) {
    p.error = "response has no \"content\" array";
    return;
  }
  Choice& choice = At(p, 0);
  for (const json& block : j["content"]) {
    if (Str(block, "type") == "text") choice.text += Str(block, "text");
  }
  choice.finish_reason = Str(j, "stop_reason");
  if (j.contains("usage")) {
    p.prompt_tokens = Int(j["usage"], "input_tokens");
    p.completion_tokens = Int(j["usage"], "output_tokens");
  }
}

}  // namespace

std::string RequestBody(const ClientOptions& o, const ChatRequest& request, int n,
                        std::optional<int64_t> seed) {
  json body = {{"model", o.model}, {"max_tokens", o.max_tokens}, {"temperature", o.temperature},
               {"top_p", o.top_p}, {"stream", o.stream}};
  if (o.provider == Provider::kAnthropic) {
    body["messages"] = Messages(request, false);
    if (!request.system.empty()) body["system"] = request.system;
    return body.dump();
  }
  body["messages"] = Messages(request, true);
  if (n != 1) body["n"] = n;
  if (seed.has_value()) body["seed"] = *seed;
  if (o.stream) body["stream_options"] = {{"include_usage", true}};
  return body.dump();
}

Parsed ParseResponse(Provider provider, absl::string_view body) {
  Parsed p;
  json j = json::parse(body.begin(), body.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    p.error = absl::StrCat("malformed JSON response (", body.size(), " bytes)");
    return p;
  }
  if (j.contains("error")) {
    p.error = absl::StrCat("server error: ", ErrorText(j["error"]));
    return p;
  }
  if (provider == Provider::kAnthropic) {
    ParseAnthropicMessage(j, p);
  } else {
    ParseOpenAiChoices(j, p, false);
    OpenAiUsage(j, p);
  }
  return p;
}

void SseParser::Feed(absl::string_view bytes) {
  pending_.append(bytes.data(), bytes.size());
  size_t start = 0;
  while (true) {
    size_t nl = pending_.find('\n', start);
    if (nl == std::string::npos) break;
    absl::string_view line(pending_.data() + start, nl - start);
    absl::ConsumeSuffix(&line, "\r");
    Line(line);
    start = nl + 1;
  }
  pending_.erase(0, start);
}

void SseParser::Finish() {
  if (!pending_.empty()) Line(pending_);
  pending_.clear();
  Line("");
}

void SseParser::Line(absl::string_view line) {
  if (line.empty()) {
    if (has_data_) sink_(event_, data_);
    event_.clear();
    data_.clear();
    has_data_ = false;
    return;
  }
  if (line.front() == ':') return;  // a comment (keep-alive)
  size_t colon = line.find(':');
  absl::string_view field = line.substr(0, colon);
  absl::string_view value = colon == absl::string_view::npos ? "" : line.substr(colon + 1);
  absl::ConsumePrefix(&value, " ");
  if (field == "event") {
    event_ = std::string(value);
  } else if (field == "data") {
    if (has_data_) data_ += "\n";
    absl::StrAppend(&data_, value);
    has_data_ = true;
  }
}

bool ApplyStreamEvent(Provider provider, const std::string& event, const std::string& data,
                      Parsed& into) {
  if (data == "[DONE]") return false;
  json j = json::parse(data, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    into.error = absl::StrCat("malformed event in stream: ", data.substr(0, 200));
    return false;
  }
  if (j.contains("error") || event == "error") {
    into.error = absl::StrCat("server error in stream: ", ErrorText(j.value("error", j)));
    return false;
  }
  if (provider == Provider::kOpenAi) {
    ParseOpenAiChoices(j, into, true);
    OpenAiUsage(j, into);
    return true;
  }
  const std::string type = Str(j, "type");
  if (type == "message_start" && j.contains("message") && j["message"].contains("usage")) {
    into.prompt_tokens = Int(j["message"]["usage"], "input_tokens");
  } else if (type == "content_block_delta" && j.contains("delta")) {
    At(into, 0).text += Str(j["delta"], "text");
  } else if (type == "message_delta") {
    if (j.contains("delta")) At(into, 0).finish_reason = Str(j["delta"], "stop_reason");
    if (j.contains("usage")) into.completion_tokens = Int(j["usage"], "output_tokens");
  } else if (type == "message_stop") {
    return false;
  }
  return true;
}

}  // namespace anvil::llm
