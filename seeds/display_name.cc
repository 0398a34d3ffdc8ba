#include "seeds/display_name.h"

#include <set>
#include <vector>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "proto/problem.h"

namespace anvil {
namespace {

constexpr char kDefaultPattern[] = "{changed}_{layout}";

std::string Pattern(const SeedFamily& f) {
  return f.name_pattern.empty() ? f.name + kDefaultPattern : f.name_pattern;
}

// The placeholders of `pattern` in order, or an error naming the unpaired brace.
absl::StatusOr<std::vector<std::string>> Placeholders(const std::string& pattern) {
  std::vector<std::string> out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '}') return absl::InvalidArgumentError("name_pattern: unpaired '}'");
    if (pattern[i] != '{') continue;
    const size_t close = pattern.find('}', i);
    if (close == std::string::npos) return absl::InvalidArgumentError("name_pattern: unpaired '{'");
    out.push_back(pattern.substr(i + 1, close - i - 1));
    i = close;
  }
  return out;
}

// The tag of a knob off its default: the value's name in lower case, else
// <label><value>.
std::string Tag(const SeedKnob& k, const std::string& value) {
  auto named = k.value_names.find(value);
  if (named != k.value_names.end()) return absl::AsciiStrToLower(named->second);
  return absl::StrCat(k.label, value);
}

}  // namespace

absl::Status CheckNamePattern(const SeedFamily& family) {
  absl::StatusOr<std::vector<std::string>> names = Placeholders(Pattern(family));
  if (!names.ok()) return names.status();
  for (const std::string& n : *names) {
    bool known = n == "layout" || n == "changed";
    for (const SeedKnob& k : family.knobs) known = known || k.name == n;
    if (!known) return absl::InvalidArgumentError(absl::StrCat("name_pattern: unknown {", n, "}"));
  }
  return absl::OkStatus();
}

std::string SeedDisplayName(const SeedFamily& family, const v1::Candidate& c) {
  const std::string pattern = Pattern(family);
  const std::vector<std::string> fixed = Placeholders(pattern).value_or(std::vector<std::string>{});
  const std::set<std::string> in_pattern(fixed.begin(), fixed.end());
  std::string changed;
  for (const SeedKnob& k : family.knobs) {
    auto v = c.params().find(k.name);
    if (in_pattern.count(k.name) || v == c.params().end() || v->second == k.default_value) continue;
    absl::StrAppend(&changed, "_", Tag(k, v->second));
  }
  std::string name;
  bool placed_changed = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const size_t close = pattern[i] == '{' ? pattern.find('}', i) : std::string::npos;
    if (close == std::string::npos) {
      name.push_back(pattern[i]);
      continue;
    }
    const std::string key = pattern.substr(i + 1, close - i - 1);
    i = close;
    if (key == "changed") {
      absl::StrAppend(&name, changed);
      placed_changed = true;
    } else if (key == "layout") {
      absl::StrAppend(&name, LayoutName(c.layout()));
    } else if (auto v = c.params().find(key); v != c.params().end()) {
      absl::StrAppend(&name, v->second);
    }
  }
  if (!placed_changed) absl::StrAppend(&name, changed);
  absl::StrAppend(&name, "_", c.id().substr(0, 8));
  return name;
}

}  // namespace anvil
