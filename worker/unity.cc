#include "worker/unity.h"

#include <cctype>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace anvil {
namespace {

constexpr absl::string_view kTag = "anvil_unity_";

bool IsDigit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

}  // namespace

std::string UnityNamespace(size_t i) { return absl::StrCat(kTag, i); }

std::string UnitySymbol(size_t i, absl::string_view abi) {
  return absl::StrCat(UnityNamespace(i), "_", abi);
}

std::string UnityTranslationUnit(const UnitySource& analysis, absl::string_view source,
                                 absl::string_view prelude, const std::vector<MacroDefines>& configs,
                                 absl::string_view file_name) {
  std::string tu = absl::StrCat(
      "// Anvil unity build: ", configs.size(),
      " configurations of one source, each in its own namespace (worker/BUILDS.md).\n"
      "// The source's headers, at global scope, as each configuration's own #includes see them:\n",
      prelude);
  const std::vector<std::string>& own = analysis.defined_macros();
  if (!own.empty()) {
    absl::StrAppend(&tu,
                    "// Macros the source defines are undefined after each configuration: none may be a "
                    "header's.\n#if defined(",
                    absl::StrJoin(own, ") || defined("),
                    ")\n#error \"anvil unity build: the source defines a macro that a header defines\"\n"
                    "#endif\n");
  }
  if (!analysis.global_names().empty() || !analysis.global_types().empty()) {
    // An extern variable clashes with a header's function, variable, namespace,
    // alias or template of that name; a namespace with its class, enumeration,
    // function, variable or alias. Either leaves nothing the source's own code
    // could use in place of its own declaration.
    absl::StrAppend(&tu,
                    "// The source's global-scope names: in a namespace they would hide a header's of the "
                    "same name, so a clash fails here.\nstruct anvil_unity_name_probe;\n");
    for (const std::string& n : analysis.global_names()) {
      absl::StrAppend(&tu, "#if !defined(", n, ")\nextern anvil_unity_name_probe ", n, ";\n#endif\n");
    }
    for (const std::string& n : analysis.global_types()) {
      absl::StrAppend(&tu, "#if !defined(", n, ")\nnamespace ", n, " {}\n#endif\n");
    }
  }
  const std::string text = absl::StrCat(source, source.empty() || source.back() == '\n' ? "" : "\n");
  for (size_t i = 0; i < configs.size(); ++i) {
    std::set<std::string> undef(own.begin(), own.end());
    absl::StrAppend(&tu, "// Configuration ", i, "\n");
    for (const auto& [name, body] : configs[i]) {
      absl::StrAppend(&tu, "#define ", name, " ", body, "\n");
      undef.insert(name);
    }
    for (const char* abi : kCandidateAbi) {
      absl::StrAppend(&tu, "#define ", abi, " ", UnitySymbol(i, abi), "\n");
      undef.insert(abi);
    }
    absl::StrAppend(&tu, "namespace ", UnityNamespace(i), " {\n#line 1 \"", file_name, "\"\n", text,
                    "}  // namespace ", UnityNamespace(i), "\n");
    for (const std::string& n : undef) absl::StrAppend(&tu, "#undef ", n, "\n");
  }
  return tu;
}

std::vector<std::string> UnityLinkAliases(size_t i) {
  std::vector<std::string> args;
  for (const char* abi : kCandidateAbi) {
    args.push_back("-Xlinker");
    args.push_back(absl::StrCat("--defsym=", abi, "=", UnitySymbol(i, abi)));
  }
  return args;
}

int UnityConfigOf(absl::string_view m) {
  for (size_t p = m.find(kTag); p != absl::string_view::npos; p = m.find(kTag, p + 1)) {
    const size_t d = p + kTag.size();
    size_t e = d;
    while (e < m.size() && IsDigit(m[e])) ++e;
    // The mangled source-name's length precedes it ("13anvil_unity_341_GLOBAL..."
    // is anvil_unity_3 then a 41-character name): the digits after the tag that
    // belong to the namespace are the ones that length covers.
    size_t b = p;
    while (b > 0 && IsDigit(m[b - 1])) --b;
    for (size_t k = p; k > b && p - (k - 1) <= 4; --k) {
      size_t len = 0;
      for (size_t j = k - 1; j < p; ++j) len = len * 10 + (m[j] - '0');
      if (len > kTag.size() && len <= kTag.size() + (e - d)) {
        int index = 0;
        for (size_t j = d; j < d + (len - kTag.size()); ++j) index = index * 10 + (m[j] - '0');
        return index;
      }
    }
  }
  return -1;
}

std::vector<std::vector<v1::KernelUsage>> SplitUsage(const std::vector<v1::KernelUsage>& usage,
                                                     size_t configs) {
  std::vector<std::vector<v1::KernelUsage>> out(configs);
  for (const v1::KernelUsage& k : usage) {
    const int i = UnityConfigOf(k.kernel());
    if (i >= 0 && static_cast<size_t>(i) < configs) {
      out[i].push_back(k);
    } else {
      for (auto& o : out) o.push_back(k);
    }
  }
  return out;
}

}  // namespace anvil
