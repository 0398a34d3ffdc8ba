#include "bench/crosscheck/plan.h"

#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace anvil::crosscheck {
namespace {

absl::Status Bad(int line, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("plan line ", line, ": ", why));
}

}  // namespace

absl::StatusOr<std::vector<Row>> ParsePlan(absl::string_view text) {
  std::vector<Row> rows;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#' || absl::StartsWith(line, "m,")) continue;
    std::vector<absl::string_view> f = absl::StrSplit(line, ',');
    if (f.size() != 7) return Bad(line_no, absl::StrCat("expected 7 fields, got ", f.size()));
    Row r;
    int64_t dims[3];
    for (int i = 0; i < 3; ++i) {
      if (!absl::SimpleAtoi(f[i], &dims[i]) || dims[i] < 1 || dims[i] > 2147483647) {
        return Bad(line_no, absl::StrCat("'", f[i], "' is not a dimension in [1, 2^31)"));
      }
    }
    r.m = int(dims[0]), r.n = int(dims[1]), r.k = int(dims[2]);
    if (f[3] != "nt" && f[3] != "nn") return Bad(line_no, "layout must be nt or nn");
    r.nt = f[3] == "nt";
    r.library = std::string(f[4]);
    if (r.library.empty()) return Bad(line_no, "no library path");
    if (!absl::SimpleAtod(f[5], &r.runner_cold) || !absl::SimpleAtod(f[6], &r.runner_hot) ||
        r.runner_cold < 0 || r.runner_hot < 0) {
      return Bad(line_no, "runner speedups must be numbers >= 0");
    }
    rows.push_back(std::move(r));
  }
  return rows;
}

bool Agrees(double ours, double theirs, double tolerance) {
  return ours > 0 && theirs > 0 && std::fabs(ours / theirs - 1) <= tolerance;
}

}  // namespace anvil::crosscheck
