// ParseClientOptions: the "llm" configuration object (keys in llm/LLM.md).
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "llm/llm.h"

namespace anvil::llm {
namespace {

using nlohmann::json;

const char* const kKeys[] = {"provider", "base_url", "model", "api_key_env", "temperature", "top_p",
                             "max_tokens", "seed", "stream", "connect_timeout_s", "timeout_s",
                             "idle_timeout_s", "max_retries", "max_concurrency",
                             "max_response_bytes", "usd_per_prompt_token",
                             "usd_per_completion_token", "headers"};

absl::Status CheckKeys(const json& j) {
  for (const auto& [key, value] : j.items()) {
    bool known = false;
    for (const char* k : kKeys) known |= key == k;
    if (!known) return absl::InvalidArgumentError(absl::StrCat("unknown LLM option \"", key, "\""));
  }
  return absl::OkStatus();
}

absl::Status ReadProvider(const json& j, ClientOptions& o) {
  const std::string p = j.value("provider", "openai");
  if (p == "openai") {
    o.provider = Provider::kOpenAi;
  } else if (p == "anthropic") {
    o.provider = Provider::kAnthropic;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("LLM provider \"", p, "\" is neither \"openai\" nor \"anthropic\""));
  }
  return absl::OkStatus();
}

absl::Duration Secs(const json& j, const char* key, absl::Duration fallback) {
  return j.contains(key) ? absl::Seconds(j[key].get<double>()) : fallback;
}

}  // namespace

absl::StatusOr<ClientOptions> ParseClientOptions(
    absl::string_view json_text, const std::function<const char*(const char*)>& getenv) {
  json j = json::parse(json_text.begin(), json_text.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError("the LLM configuration is not a JSON object");
  }
  if (absl::Status s = CheckKeys(j); !s.ok()) return s;
  ClientOptions o;
  if (absl::Status s = ReadProvider(j, o); !s.ok()) return s;
  try {
    o.base_url = j.value("base_url", o.base_url);
    o.model = j.value("model", "");
    o.temperature = j.value("temperature", o.temperature);
    o.top_p = j.value("top_p", o.top_p);
    o.max_tokens = j.value("max_tokens", o.max_tokens);
    if (j.contains("seed")) o.seed = j["seed"].get<int64_t>();
    o.stream = j.value("stream", o.stream);
    o.connect_timeout = Secs(j, "connect_timeout_s", o.connect_timeout);
    o.total_timeout = Secs(j, "timeout_s", o.total_timeout);
    o.idle_timeout = Secs(j, "idle_timeout_s", o.idle_timeout);
    o.max_retries = j.value("max_retries", o.max_retries);
    o.max_concurrency = j.value("max_concurrency", o.max_concurrency);
    o.max_response_bytes = j.value("max_response_bytes", o.max_response_bytes);
    o.usd_per_prompt_token = j.value("usd_per_prompt_token", 0.0);
    o.usd_per_completion_token = j.value("usd_per_completion_token", 0.0);
    if (j.contains("headers")) o.extra_headers = j["headers"].get<std::map<std::string, std::string>>();
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("LLM configuration: ", e.what()));
  }
  if (j.contains("api_key_env")) {
    const std::string name = j["api_key_env"].is_string() ? j["api_key_env"].get<std::string>() : "";
    const char* key = name.empty() ? nullptr : getenv(name.c_str());
    if (key == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("the LLM API key variable \"", name, "\" is not set"));
    }
    o.api_key = key;
  }
  if (o.model.empty()) return absl::InvalidArgumentError("the LLM configuration names no model");
  return o;
}

}  // namespace anvil::llm
