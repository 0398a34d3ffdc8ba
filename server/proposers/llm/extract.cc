#include "server/proposers/llm/extract.h"

#include <regex>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "proto/candidate.h"

namespace anvil {
namespace {

// A fence line: up to 3 spaces, then 3+ backticks or tildes. Returns its
// character and length, or 0.
std::pair<char, size_t> Fence(absl::string_view line) {
  size_t indent = 0;
  while (indent < line.size() && indent < 3 && line[indent] == ' ') ++indent;
  line.remove_prefix(indent);
  if (line.empty() || (line[0] != '`' && line[0] != '~')) return {0, 0};
  size_t n = 0;
  while (n < line.size() && line[n] == line[0]) ++n;
  return n >= 3 ? std::pair<char, size_t>{line[0], n} : std::pair<char, size_t>{0, 0};
}


// The blocks of `text`, and the lines outside them into `prose` when given.
std::vector<std::string> SplitBlocks(absl::string_view text, std::string* prose) {
  std::vector<std::string> blocks;
  std::string current;
  std::pair<char, size_t> open{0, 0};
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    std::pair<char, size_t> f = Fence(line);
    if (open.first == 0) {
      if (f.first != 0) {
        open = f;
        current.clear();
      } else if (prose != nullptr) {
        absl::StrAppend(prose, line, "\n");
      }
      continue;
    }
    // A closing fence: same character, at least as long, nothing after it.
    if (f.first == open.first && f.second >= open.second &&
        absl::StripAsciiWhitespace(line).size() == f.second) {
      blocks.push_back(current);
      open = {0, 0};
      continue;
    }
    absl::StrAppend(&current, line, "\n");
  }
  if (open.first != 0 && !current.empty()) blocks.push_back(current);  // cut off mid-block
  return blocks;
}

}  // namespace

std::vector<std::string> FencedBlocks(absl::string_view text) { return SplitBlocks(text, nullptr); }

std::string AbiProblem(absl::string_view source) {
  static const std::regex gemm(R"(\bint\s+anvil_gemm\s*\()");
  static const std::regex ws(R"(\bsize_t\s+anvil_workspace_bytes\s*\()");
  static const std::regex linkage(R"(extern\s+"C")");
  const std::string s(source);
  std::smatch m;
  if (!std::regex_search(s, m, gemm)) return "no definition of int anvil_gemm(...)";
  const size_t gemm_at = m.position(0);
  if (!std::regex_search(s, m, ws)) return "no definition of size_t anvil_workspace_bytes(...)";
  if (!std::regex_search(s, m, linkage) || static_cast<size_t>(m.position(0)) > gemm_at) {
    return "anvil_gemm is not declared extern \"C\" (C linkage)";
  }
  return "";
}

Extraction Extractor::Extract(absl::string_view answer) {
  Extraction out;
  std::string prose;
  std::vector<std::string> blocks = SplitBlocks(answer, &prose);
  out.prose = std::string(absl::StripAsciiWhitespace(prose));
  if (blocks.empty() && absl::StrContains(answer, "anvil_gemm")) blocks.push_back(std::string(answer));
  std::vector<std::string> with_abi;
  for (const std::string& b : blocks) {
    if (absl::StrContains(b, "anvil_gemm")) with_abi.push_back(b);
  }
  if (with_abi.empty()) {
    out.refused.push_back({"no_code", blocks.empty() ? "the answer has no code block"
                                                     : "no code block defines anvil_gemm"});
    return out;
  }
  for (const std::string& source : with_abi) {
    if (static_cast<int>(out.kernels.size()) >= max_per_answer_) break;
    if (std::string why = AbiProblem(source); !why.empty()) {
      out.refused.push_back({"abi", why});
      continue;
    }
    absl::StatusOr<std::vector<sandbox::PolicyViolation>> v = sandbox::CheckSource(source, policy_);
    if (!v.ok() || !v->empty()) {
      out.refused.push_back({"policy", v.ok() ? v->front().message : std::string(v.status().message())});
      continue;
    }
    std::string hash = Sha256Hex(NormaliseSource(source));
    if (!seen_.insert(hash).second) {
      out.refused.push_back({"duplicate", absl::StrCat("same source as an earlier answer (", hash.substr(0, 8), ")")});
      continue;
    }
    out.kernels.push_back({source, hash});
  }
  return out;
}

}  // namespace anvil
