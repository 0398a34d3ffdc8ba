#include "worker/builder_flags.h"

#include <algorithm>
#include <map>
#include <regex>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace anvil::builder_internal {
namespace {

// Extra flags a candidate may carry; anything else could reach the host
// toolchain (plugins, output paths, includes outside the allowlist).
bool AllowedFlag(const std::string& f) {
  static const std::regex kAllowed(
      R"(-D[A-Za-z_][A-Za-z0-9_]*(=[A-Za-z0-9_.+-]*)?|-maxrregcount=[0-9]{1,3}|)"
      R"(--expt-relaxed-constexpr|--use_fast_math|-Xptxas=-O[0-3])");
  return std::regex_match(f, kAllowed);
}

bool AllowedParam(const std::string& k, const std::string& v) {
  static const std::regex kKey("[A-Z][A-Z0-9_]{0,47}");
  static const std::regex kValue("[A-Za-z0-9_.+-]{1,64}");
  return std::regex_match(k, kKey) && std::regex_match(v, kValue);
}

}  // namespace

std::vector<std::string> FlagSet::All() const {
  std::vector<std::string> f = head;
  f.push_back("-shared");
  f.insert(f.end(), tail.begin(), tail.end());
  for (const auto& [name, value] : defines) f.push_back(absl::StrCat("-D", name, "=", value));
  f.insert(f.end(), extra.begin(), extra.end());
  return f;
}

std::vector<std::string> FlagSet::Object() const {
  std::vector<std::string> f = head;
  f.insert(f.end(), tail.begin(), tail.end());
  f.insert(f.end(), extra.begin(), extra.end());
  return f;
}

bool FlagSet::ExtraDefines() const {
  return std::any_of(extra.begin(), extra.end(), [](const std::string& x) { return absl::StartsWith(x, "-D"); });
}

absl::StatusOr<FlagSet> MakeFlags(const v1::Candidate& c, const Toolchain& toolchain) {
  const std::string arch = c.arch().empty() ? "sm_90a" : c.arch();
  if (arch != "sm_90a" && arch != "sm_90") {
    return absl::InvalidArgumentError(absl::StrCat("arch '", arch, "' must be sm_90a or sm_90"));
  }
  const std::string compute = arch == "sm_90a" ? "compute_90a" : "compute_90";
  FlagSet f;
  f.head = {"-std=c++17", "-O3"};
  f.tail = {"-Xcompiler", "-fPIC", "--cudart", "shared", "-lineinfo",
            "-Xptxas", "-v", absl::StrCat("-gencode=arch=", compute, ",code=", arch)};
  if (!toolchain.cutlass_dir.empty()) {
    f.tail.push_back("-I" + toolchain.cutlass_dir + "/include");
    f.tail.push_back("-I" + toolchain.cutlass_dir + "/tools/util/include");
  }
  if (c.layout() != v1::LAYOUT_NT && c.layout() != v1::LAYOUT_NN) {
    return absl::InvalidArgumentError("candidate layout must be nt or nn");
  }
  f.defines.emplace_back(c.layout() == v1::LAYOUT_NT ? "ANVIL_LAYOUT_NT" : "ANVIL_LAYOUT_NN", "1");
  std::map<std::string, std::string> params(c.params().begin(), c.params().end());
  for (const auto& [k, v] : params) {
    if (!AllowedParam(k, v)) {
      return absl::InvalidArgumentError(absl::StrCat("parameter ", k, "=", v, " is not allowed"));
    }
    f.defines.emplace_back("ANVIL_" + k, v);
  }
  for (absl::string_view x : absl::StrSplit(c.flags(), ' ', absl::SkipEmpty())) {
    if (!AllowedFlag(std::string(x))) {
      return absl::InvalidArgumentError(absl::StrCat("nvcc flag '", x, "' is not allowed"));
    }
    f.extra.emplace_back(x);
  }
  return f;
}

std::string ArchOf(const v1::Candidate& c) { return c.arch().empty() ? "sm_90a" : c.arch(); }

}  // namespace anvil::builder_internal
