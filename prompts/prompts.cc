#include "prompts/prompts.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

#ifndef ANVIL_SOURCE_PROMPTS_DIR
#define ANVIL_SOURCE_PROMPTS_DIR ""
#endif

namespace anvil {

std::string DefaultPromptsDir(const std::string& executable_dir) {
  if (const char* env = std::getenv("ANVIL_PROMPTS_DIR")) return env;
  std::string bundled = executable_dir + "/../share/anvil/prompts";
  if (std::filesystem::exists(bundled)) return bundled;
  return ANVIL_SOURCE_PROMPTS_DIR;
}

absl::StatusOr<std::string> LoadPrompt(const std::string& dir, const std::string& name) {
  std::ifstream in(dir + "/" + name + ".txt");
  if (!in) return absl::NotFoundError(absl::StrCat("no prompt template ", dir, "/", name, ".txt"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

absl::StatusOr<std::string> PromptsVersion(const std::string& dir) {
  std::ifstream in(dir + "/VERSION");
  std::string version;
  if (!in || !std::getline(in, version) || version.empty()) {
    return absl::NotFoundError(absl::StrCat("no prompt version in ", dir, "/VERSION"));
  }
  return version;
}

absl::StatusOr<std::string> RenderPrompt(const std::string& text,
                                         const std::map<std::string, std::string>& values) {
  std::string out;
  size_t pos = 0;
  while (true) {
    size_t open = text.find("{{", pos);
    if (open == std::string::npos) break;
    size_t close = text.find("}}", open);
    if (close == std::string::npos) return absl::InvalidArgumentError("unclosed {{ in template");
    std::string key = text.substr(open + 2, close - open - 2);
    auto it = values.find(key);
    if (it == values.end()) return absl::InvalidArgumentError(absl::StrCat("no value for {{", key, "}}"));
    absl::StrAppend(&out, text.substr(pos, open - pos), it->second);
    pos = close + 2;
  }
  absl::StrAppend(&out, text.substr(pos));
  return out;
}

}  // namespace anvil
