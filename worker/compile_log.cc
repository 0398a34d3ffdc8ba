#include "worker/compile_log.h"

#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"

namespace anvil {
namespace {

bool IsError(absl::string_view line) {
  return line.find("error") != absl::string_view::npos ||
         line.find("Error") != absl::string_view::npos ||
         line.find("fatal") != absl::string_view::npos;
}

bool IsNoise(absl::string_view line) {
  return line.empty() || line.find("ptxas info") != absl::string_view::npos ||
         line.find("bytes stack frame") != absl::string_view::npos ||
         line.find("Detected during:") != absl::string_view::npos;
}

}  // namespace

std::string TrimCompileLog(absl::string_view output, absl::string_view scratch_dir,
                           int max_lines, size_t max_bytes) {
  std::string text(output);
  if (!scratch_dir.empty()) {
    text = absl::StrReplaceAll(text, {{absl::StrCat(scratch_dir, "/"), ""}, {scratch_dir, "."}});
  }
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  std::vector<std::string> kept;
  std::set<std::string> seen;
  int errors = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (!IsError(lines[i]) || !seen.insert(std::string(lines[i])).second) continue;
    ++errors;
    kept.emplace_back(lines[i]);
    // nvcc prints the offending source line and a caret after an error.
    for (size_t j = i + 1; j < lines.size() && j <= i + 2; ++j) {
      if (IsError(lines[j]) || IsNoise(lines[j])) break;
      kept.emplace_back(lines[j]);
    }
  }
  if (kept.empty()) {  // no recognisable error: keep the tail, minus noise
    for (absl::string_view l : lines) {
      if (!IsNoise(l)) kept.emplace_back(l);
    }
    if (kept.size() > size_t(max_lines)) kept.erase(kept.begin(), kept.end() - max_lines);
  }
  std::string out;
  int shown = 0;
  for (const std::string& l : kept) {
    if (shown == max_lines || out.size() + l.size() + 1 > max_bytes) {
      absl::StrAppend(&out, "... (", kept.size() - shown, " more lines; ", errors,
                      " distinct errors in all)\n");
      break;
    }
    absl::StrAppend(&out, l, "\n");
    ++shown;
  }
  return out;
}

}  // namespace anvil
