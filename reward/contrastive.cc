#include "reward/contrastive.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "reward/profile_hint.h"
#include "reward/reward.h"

namespace anvil {
namespace {

// Per line of `a` and `b`: kept, removed or added, by longest common subsequence.
struct Edit {
  char op;  // ' ', '-', '+'
  std::string line;
};

std::vector<Edit> LineEdits(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<int>> lcs(n + 1, std::vector<int>(m + 1, 0));
  for (size_t i = n; i-- > 0;) {
    for (size_t j = m; j-- > 0;) {
      lcs[i][j] = a[i] == b[j] ? lcs[i + 1][j + 1] + 1 : std::max(lcs[i + 1][j], lcs[i][j + 1]);
    }
  }
  std::vector<Edit> edits;
  size_t i = 0, j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[i] == b[j]) {
      edits.push_back({' ', a[i++]});
      ++j;
    } else if (i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1])) {
      edits.push_back({'-', a[i++]});  // removals before additions, as diff prints them
    } else {
      edits.push_back({'+', b[j++]});
    }
  }
  return edits;
}

std::string UsageLine(const std::vector<v1::KernelUsage>& usage) {
  std::vector<std::string> parts;
  for (const v1::KernelUsage& u : usage) {
    parts.push_back(absl::StrFormat("%d registers, %d B static shared, %d B spilled", u.registers(),
                                    u.shared_bytes(), u.spill_store_bytes() + u.spill_load_bytes()));
  }
  return parts.empty() ? "not reported" : absl::StrJoin(parts, "; ");
}

}  // namespace

double ExemplarSpeedup(const v1::Measurement& m, const std::string& figure) {
  const double ours = FigureUs(m.timings(), figure), base = BestBaselineUs(m, figure);
  return ours > 0 && base > 0 ? base / ours : 0;
}

std::string UnifiedDiff(const std::string& from, const std::string& to, const std::string& from_name,
                        const std::string& to_name, int context, int max_lines) {
  std::vector<std::string> a = absl::StrSplit(from, '\n'), b = absl::StrSplit(to, '\n');
  std::vector<Edit> edits = LineEdits(a, b);
  std::vector<bool> show(edits.size(), false);
  bool changed = false;
  for (size_t k = 0; k < edits.size(); ++k) {
    if (edits[k].op == ' ') continue;
    changed = true;
    for (int d = -context; d <= context; ++d) {
      if (k + d < edits.size()) show[k + d] = true;
    }
  }
  if (!changed) return "";
  std::string out = absl::StrCat("--- ", from_name, "\n+++ ", to_name, "\n");
  int lines = 0;
  size_t ai = 0, bi = 0;  // 1-based positions of the next line in a and b, minus one
  for (size_t k = 0; k < edits.size(); ++k) {
    if (show[k] && (k == 0 || !show[k - 1])) absl::StrAppend(&out, "@@ -", ai + 1, " +", bi + 1, " @@\n");
    if (show[k]) {
      if (++lines > max_lines) {
        absl::StrAppend(&out, "... (diff cut after ", max_lines, " lines)\n");
        break;
      }
      absl::StrAppend(&out, std::string(1, edits[k].op), edits[k].line, "\n");
    }
    ai += edits[k].op != '+';
    bi += edits[k].op != '-';
  }
  return out;
}

std::string RenderContrast(const std::vector<ContrastExemplar>& exemplars, const std::string& figure) {
  if (exemplars.empty()) return "";
  std::string out;
  const ContrastExemplar& best = exemplars[0];
  for (size_t i = 0; i < exemplars.size(); ++i) {
    const ContrastExemplar& e = exemplars[i];
    const double speedup = ExemplarSpeedup(e.measurement, figure);
    absl::StrAppendFormat(&out, "### %c: %s%s\n", char('A' + i), e.candidate.name(),
                          i == 0 ? " (the current best)" : "");
    absl::StrAppendFormat(&out, "%.3fx the fastest vendor baseline by %s time on %s (%.2f us)\n",
                          speedup, figure, e.problem_name, FigureUs(e.measurement.timings(), figure));
    if (!e.candidate.params().empty()) {
      std::map<std::string, std::string> knobs(e.candidate.params().begin(), e.candidate.params().end());
      absl::StrAppend(&out, "knobs: ", absl::StrJoin(knobs, " ", absl::PairFormatter("=")), "\n");
    }
    absl::StrAppend(&out, "ptxas: ", UsageLine(e.usage), "\n");
    absl::StrAppend(&out, SummariseProfile(e.measurement).text, "\n");
    if (i == 0) {
      absl::StrAppend(&out, "```cuda\n", e.candidate.source(), "\n```\n\n");
      continue;
    }
    const bool faster = speedup > ExemplarSpeedup(best.measurement, figure);
    const std::string diff = faster ? UnifiedDiff(best.candidate.source(), e.candidate.source(), "A", std::string(1, char('A' + i)))
                                    : UnifiedDiff(e.candidate.source(), best.candidate.source(),
                                                  std::string(1, char('A' + i)), "A");
    absl::StrAppend(&out, faster ? "What changes from A to this faster variant:\n"
                                 : "What changes from this slower variant to A:\n",
                    diff.empty() ? "(same source; other compile-time knobs)\n" : diff, "\n");
  }
  return out;
}

}  // namespace anvil
