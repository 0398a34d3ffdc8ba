// CheckSource: the source policy, a first filter before nvcc. What it checks
// and how it is evaded: SANDBOX.md ("Source policy").
#include <algorithm>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "sandbox/sandbox.h"
#include "sandbox/source_lexer.h"

namespace anvil::sandbox {
namespace {

using internal::LogicalLine;
using internal::Token;

// How a banned name is matched: as a call "name(", anywhere, or as "std::name".
enum class Match { kCall, kAny, kStd };
struct Banned {
  const char* rule;
  Match match;
  const char* why;
};

const std::map<std::string, Banned>& BannedNames() {
  static const auto* names = [] {
    auto* m = new std::map<std::string, Banned>();
    auto add = [m](std::initializer_list<const char*> list, Banned b) {
      for (const char* n : list) m->emplace(n, b);
    };
    add({"system", "popen", "fork", "vfork", "clone", "clone3", "execl", "execle", "execlp", "execv",
         "execve", "execvp", "execvpe", "execveat", "fexecve", "posix_spawn", "posix_spawnp",
         "daemon", "kill", "killpg", "ptrace", "prctl", "setsid", "exit", "_exit", "_Exit",
         "quick_exit", "signal", "sigaction", "alarm", "setitimer", "unshare", "setns", "chroot",
         "mount"},
        {"process", Match::kCall, "a candidate must not start, signal or end processes"});
    add({"dlopen", "dlmopen", "dlsym", "dlvsym"},
        {"dlopen", Match::kCall, "a candidate must not load code at run time"});
    add({"socket", "socketpair", "connect", "bind", "listen", "accept", "accept4", "sendto",
         "recvfrom", "sendmsg", "recvmsg", "getaddrinfo", "gethostbyname"},
        {"socket", Match::kCall, "a candidate has no network"});
    add({"fopen", "fopen64", "freopen", "fdopen", "tmpfile", "tmpnam", "mkstemp", "mkdtemp", "open",
         "open64", "openat", "creat", "remove", "rename", "unlink", "unlinkat", "mkdir", "rmdir",
         "truncate", "chmod", "chown", "symlink", "link", "opendir"},
        {"file_io", Match::kCall, "a candidate must not touch files"});
    add({"ifstream", "ofstream", "fstream", "basic_ifstream", "basic_ofstream", "basic_fstream",
         "filebuf", "basic_filebuf"},
        {"file_io", Match::kAny, "a candidate must not touch files"});
    add({"getenv", "secure_getenv", "setenv", "putenv", "unsetenv", "clearenv"},
        {"environment", Match::kCall, "a candidate must not read or change the environment"});
    add({"environ", "__environ", "_environ"},
        {"environment", Match::kAny, "a candidate must not read or change the environment"});
    add({"pthread_create"}, {"thread", Match::kCall, "a candidate must not start host threads"});
    add({"thread", "jthread", "async"},
        {"thread", Match::kStd, "a candidate must not start host threads"});
    add({"syscall", "__syscall"},
        {"syscall", Match::kAny, "a candidate must not make raw system calls"});
    return m;
  }();
  return *names;
}

struct Checker {
  const SourcePolicy& policy;
  std::vector<std::string> allowed;
  std::map<int, std::string> physical;  // line -> source text, for excerpts
  std::vector<PolicyViolation> found;

  void Add(const char* rule, int line, const std::string& message) {
    std::string excerpt(absl::StripAsciiWhitespace(physical[line]));
    if (excerpt.size() > 160) excerpt = excerpt.substr(0, 157) + "...";
    found.push_back({rule, line, excerpt, absl::StrCat("line ", line, ": ", message)});
  }

  bool IncludeAllowed(const std::string& header) const {
    if (header.empty() || header[0] == '/' || absl::StrContains(header, "..") ||
        absl::StrContains(header, '\\')) {
      return false;
    }
    return std::any_of(allowed.begin(), allowed.end(), [&](const std::string& a) {
      return a.back() == '/' ? absl::StartsWith(header, a) : header == a;
    });
  }

  void CheckInclude(const std::string& name, const std::string& rest, int line) {
    const char open = rest.empty() ? '\0' : rest[0];
    const size_t close = open == '<' ? rest.find('>', 1) : open == '"' ? rest.find('"', 1)
                                                                       : std::string::npos;
    if (name != "include") {
      Add("include", line, absl::StrCat("#", name, " is not allowed: only #include is"));
    } else if (close == std::string::npos) {
      Add("include", line, absl::StrCat("#include ", rest, " is not allowed: computed includes are "
                                        "not, name the header literally"));
    } else if (const std::string header = rest.substr(1, close - 1); !IncludeAllowed(header)) {
      Add("include", line, absl::StrCat("#include ", rest.substr(0, close + 1),
                                        " is not allowed: only CUDA toolkit, CUTLASS/CuTe and "
                                        "OS-free standard headers are"));
    }
  }

  void CheckPragma(const std::string& text, int line) {
    static const char* const kAllowed[] = {"unroll", "nounroll", "once", "nv_diag_", "diag_",
                                           "nv_diagnostic", "GCC diagnostic", "clang diagnostic"};
    const std::string t(absl::StripAsciiWhitespace(text));
    for (const char* a : kAllowed) {
      if (absl::StartsWith(t, a)) return;
    }
    Add("pragma", line, absl::StrCat("#pragma ", t.substr(0, 40), " is not allowed: only unroll, "
                                     "once and diagnostic pragmas are"));
  }

  // True for a directive line (handled here); code lines are left to the tokenizer.
  bool CheckDirective(const LogicalLine& l) {
    std::string name, rest;
    if (!internal::ParseDirective(l.text, &name, &rest)) return false;
    static const char* const kPlain[] = {"",      "define", "undef", "if",      "ifdef", "ifndef",
                                         "elif",  "elifdef", "elifndef", "else", "endif", "error",
                                         "warning", "line"};
    if (name == "include" || name == "include_next" || name == "import") {
      CheckInclude(name, rest, l.line);
    } else if (name == "pragma") {
      CheckPragma(rest, l.line);
    } else if (std::find(std::begin(kPlain), std::end(kPlain), name) == std::end(kPlain)) {
      Add("directive", l.line, absl::StrCat("#", name, " is not allowed"));
    } else if (name == "define") {
      internal::LogicalLine body{rest, l.line, {}};
      std::vector<Token> tokens;
      internal::Tokenize(body, &tokens);
      CheckTokens(tokens);
    }
    return true;
  }

  void CheckAsmText(const std::string& text, int line) {
    static const char* const kHost[] = {"syscall", "sysenter", "int $0x80", "int 0x80", "int $128",
                                        ".byte",   ".insn",    ".inst",     "%rax",     "%rdi",
                                        "%rsi",    "%rsp",     "%rbp",      "%eax",     "%edi"};
    const std::string lower = absl::AsciiStrToLower(text);
    for (const char* h : kHost) {
      if (absl::StrContains(lower, h)) {
        Add("inline_asm_host", line, absl::StrCat("inline asm containing '", h, "' is not allowed: "
                                                  "only PTX belongs in asm"));
        return;
      }
    }
  }

  void CheckName(const std::vector<Token>& t, size_t i) {
    auto it = BannedNames().find(t[i].text);
    if (it == BannedNames().end()) return;
    const Banned& b = it->second;
    const std::string prev = i > 0 ? t[i - 1].text : "";
    if (prev == "." || prev == "->") return;  // a member of something else
    const bool qualified = prev == "::" && i > 1 && t[i - 2].kind == Token::kIdentifier;
    const bool std_qualified = qualified && t[i - 2].text == "std";
    if (qualified && !std_qualified) return;  // another namespace's function of that name
    const bool call = i + 1 < t.size() && t[i + 1].text == "(";
    if ((b.match == Match::kCall && !call) || (b.match == Match::kStd && !std_qualified)) return;
    const std::string shown = absl::StrCat(std_qualified ? "std::" : "", t[i].text,
                                           b.match == Match::kCall ? "(" : "");
    Add(b.rule, t[i].line, absl::StrCat(shown, " is not allowed: ", b.why));
  }

  void CheckTokens(const std::vector<Token>& t) {
    int asm_depth = -1;  // paren depth of an asm statement's '(' when inside one
    int depth = 0;
    for (size_t i = 0; i < t.size(); ++i) {
      const Token& k = t[i];
      if (k.kind == Token::kPunct && k.text == "(") ++depth;
      if (k.kind == Token::kPunct && k.text == ")" && --depth < asm_depth) asm_depth = -1;
      if (k.kind == Token::kString && asm_depth >= 0) CheckAsmText(k.text, k.line);
      if (k.kind != Token::kIdentifier) continue;
      if (k.text == "asm" || k.text == "__asm__" || k.text == "__asm") asm_depth = depth + 1;
      if (k.text == "_Pragma" && i + 2 < t.size() && t[i + 2].kind == Token::kString) {
        CheckPragma(t[i + 2].text, k.line);
      }
      CheckName(t, i);
    }
  }
};

std::map<int, std::string> PhysicalLines(absl::string_view source) {
  std::map<int, std::string> lines;
  int n = 1;
  for (size_t start = 0; start <= source.size(); ++n) {
    size_t end = source.find('\n', start);
    if (end == absl::string_view::npos) end = source.size();
    lines[n] = std::string(source.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

}  // namespace

std::vector<std::string> DefaultAllowedIncludes() {
  return {// CUDA toolkit
          "cuda.h", "cuda_runtime.h", "cuda_runtime_api.h", "cudaTypedefs.h", "cuda_fp16.h",
          "cuda_fp16.hpp", "cuda_bf16.h", "cuda_bf16.hpp", "cuda_fp8.h", "cuda_fp8.hpp",
          "cuda_pipeline.h", "cuda_pipeline_primitives.h", "cuda_awbarrier.h",
          "cuda_awbarrier_primitives.h", "cuda_device_runtime_api.h", "device_launch_parameters.h",
          "device_functions.h", "vector_types.h", "vector_functions.h", "builtin_types.h",
          "driver_types.h", "mma.h", "cooperative_groups.h", "cooperative_groups/", "cuda/",
          // CUTLASS and CuTe
          "cute/", "cutlass/",
          // standard headers without OS access (cstdio: device printf; fopen & co. are
          // caught by name). Not cstdlib (system, getenv, exit), fstream, thread, unistd.h.
          "cstdint", "stdint.h", "cstddef", "stddef.h", "type_traits", "utility", "algorithm",
          "array", "limits", "climits", "cfloat", "cmath", "math.h", "cstring", "cassert",
          "assert.h", "cstdio", "stdio.h", "tuple", "initializer_list", "numeric", "iterator",
          "new", "bit", "concepts", "functional", "ratio", "vector"};
}

absl::StatusOr<std::vector<PolicyViolation>> CheckSource(absl::string_view source,
                                                         const SourcePolicy& policy) {
  if (policy.max_bytes <= 0) return absl::InvalidArgumentError("SourcePolicy.max_bytes must be > 0");
  Checker c{policy, policy.allowed_include_prefixes, PhysicalLines(source), {}};
  if (c.allowed.empty()) c.allowed = DefaultAllowedIncludes();
  if (static_cast<int64_t>(source.size()) > policy.max_bytes) {
    c.found.push_back({"size", 0, "", absl::StrCat("the source is ", source.size(),
                                                   " bytes; at most ", policy.max_bytes,
                                                   " are allowed")});
    return c.found;
  }
  std::vector<Token> tokens;
  for (const LogicalLine& l : internal::SplitLogicalLines(source)) {
    if (!c.CheckDirective(l)) internal::Tokenize(l, &tokens);
  }
  c.CheckTokens(tokens);
  std::stable_sort(c.found.begin(), c.found.end(),
                   [](const PolicyViolation& a, const PolicyViolation& b) { return a.line < b.line; });
  return c.found;
}

}  // namespace anvil::sandbox
