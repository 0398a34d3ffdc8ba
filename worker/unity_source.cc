#include "worker/unity_source.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <map>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "sandbox/source_lexer.h"

namespace anvil {
namespace {

namespace lex = sandbox::internal;

bool IsIdentStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsIdentChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool IsAnvil(absl::string_view name) { return absl::StartsWith(name, "ANVIL_"); }

// The leading identifier of `text` ("" if none).
std::string LeadingIdent(absl::string_view text) {
  size_t n = 0;
  if (text.empty() || !IsIdentStart(text[0])) return "";
  while (n < text.size() && IsIdentChar(text[n])) ++n;
  return std::string(text.substr(0, n));
}

bool IsKeyword(const std::string& s) {
  static const std::set<std::string> kKeywords = {
      "alignas", "alignof", "and", "asm", "auto", "bool", "break", "case", "catch", "char",
      "char8_t", "char16_t", "char32_t", "class", "const", "consteval", "constexpr", "constinit",
      "const_cast", "continue", "decltype", "default", "delete", "do", "double", "dynamic_cast",
      "else", "enum", "explicit", "export", "extern", "false", "final", "float", "for", "friend",
      "goto", "if", "inline", "int", "long", "mutable", "namespace", "new", "noexcept", "not",
      "nullptr", "operator", "or", "override", "private", "protected", "public", "register",
      "reinterpret_cast", "requires", "return", "short", "signed", "sizeof", "static",
      "static_assert", "static_cast", "struct", "switch", "template", "this", "thread_local",
      "throw", "true", "try", "typedef", "typeid", "typename", "union", "unsigned", "using",
      "virtual", "void", "volatile", "wchar_t", "while"};
  return kKeywords.count(s) > 0;
}

struct Macro {
  bool function_like = false;
  std::string body;        // replacement list (object-like)
  std::string definition;  // the text after "#define ", to reproduce it
};
using Macros = std::map<std::string, Macro>;

// A controlling expression of #if/#elif, evaluated as the preprocessor would
// over intmax_t. Anything it cannot evaluate exactly (a function-like macro, a
// name that is not ANVIL_ and not defined by the source or the -D flags, a
// character or floating literal) is an error: the caller then builds alone.
class Expression {
 public:
  explicit Expression(const Macros& macros) : macros_(macros) {}

  absl::StatusOr<bool> Evaluate(absl::string_view text) {
    std::set<std::string> expanding;
    if (absl::Status s = Expand(text, &expanding, 0); !s.ok()) return s;
    pos_ = 0;
    int64_t v = Conditional();
    if (!error_.empty()) return absl::FailedPreconditionError(error_);
    if (pos_ != toks_.size()) return absl::FailedPreconditionError("cannot parse #if expression");
    return v != 0;
  }

 private:
  struct Tok {
    bool number = false;
    int64_t value = 0;
    std::string op;
  };

  // Tokenizes and macro-expands `text` into toks_, resolving `defined`.
  absl::Status Expand(absl::string_view text, std::set<std::string>* expanding, int depth) {
    if (depth > 64) return absl::FailedPreconditionError("macro expansion too deep");
    size_t i = 0;
    while (i < text.size()) {
      const char c = text[i];
      if (std::isspace(static_cast<unsigned char>(c))) { ++i; continue; }
      if (IsIdentStart(c)) {
        std::string id = LeadingIdent(text.substr(i));
        i += id.size();
        if (id == "defined") {
          size_t j = text.find_first_not_of(" \t", i);
          const bool paren = j != absl::string_view::npos && text[j] == '(';
          if (paren) j = text.find_first_not_of(" \t", j + 1);
          const std::string name = j == absl::string_view::npos ? "" : LeadingIdent(text.substr(j));
          if (name.empty()) return absl::FailedPreconditionError("defined without a name");
          j += name.size();
          if (paren) {
            j = text.find_first_not_of(" \t", j);
            if (j == absl::string_view::npos || text[j] != ')') {
              return absl::FailedPreconditionError("defined( without )");
            }
            ++j;
          }
          i = j;
          if (macros_.count(name) == 0 && !IsAnvil(name)) {
            return absl::FailedPreconditionError(
                absl::StrCat("#if tests '", name, "', which a header could define"));
          }
          toks_.push_back({true, macros_.count(name) ? 1 : 0, ""});
          continue;
        }
        auto m = macros_.find(id);
        if (m != macros_.end() && expanding->count(id) == 0) {
          if (m->second.function_like || absl::StrContains(m->second.body, "#")) {
            return absl::FailedPreconditionError(absl::StrCat("#if uses the macro '", id, "'"));
          }
          expanding->insert(id);
          if (absl::Status s = Expand(m->second.body, expanding, depth + 1); !s.ok()) return s;
          expanding->erase(id);
        } else if (IsAnvil(id) || id == "false") {
          toks_.push_back({true, 0, ""});
        } else if (id == "true") {
          toks_.push_back({true, 1, ""});
        } else {
          return absl::FailedPreconditionError(
              absl::StrCat("#if uses '", id, "', which a header could define"));
        }
        continue;
      }
      if (std::isdigit(static_cast<unsigned char>(c))) {
        size_t j = i;
        while (j < text.size() && (IsIdentChar(text[j]) || text[j] == '.' || text[j] == '\'')) ++j;
        absl::StatusOr<int64_t> v = Number(text.substr(i, j - i));
        if (!v.ok()) return v.status();
        toks_.push_back({true, *v, ""});
        i = j;
        continue;
      }
      static const char* kOps[] = {"&&", "||", "==", "!=", "<=", ">=", "<<", ">>", "+", "-", "*",
                                   "/",  "%",  "<",  ">",  "!",  "~",  "&",  "|",  "^", "?", ":",
                                   "(",  ")"};
      bool matched = false;
      for (const char* op : kOps) {
        if (text.substr(i, std::char_traits<char>::length(op)) == op) {
          toks_.push_back({false, 0, op});
          i += std::char_traits<char>::length(op);
          matched = true;
          break;
        }
      }
      if (!matched) {
        return absl::FailedPreconditionError(absl::StrCat("#if holds '", std::string(1, c), "'"));
      }
    }
    return absl::OkStatus();
  }

  static absl::StatusOr<int64_t> Number(absl::string_view s) {
    std::string digits;
    for (char c : s) {
      if (c != '\'') digits.push_back(c);
    }
    while (!digits.empty() && std::strchr("uUlL", digits.back()) != nullptr) digits.pop_back();
    int base = 10;
    size_t start = 0;
    if (digits.size() > 1 && digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X')) base = 16, start = 2;
    else if (digits.size() > 1 && digits[0] == '0' && (digits[1] == 'b' || digits[1] == 'B')) base = 2, start = 2;
    else if (digits.size() > 1 && digits[0] == '0') base = 8, start = 1;
    if (start >= digits.size() && base != 8) return absl::FailedPreconditionError("bad number");
    int64_t v = 0;
    for (size_t k = start; k < digits.size(); ++k) {
      const char c = static_cast<char>(std::tolower(static_cast<unsigned char>(digits[k])));
      const int d = std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : 99;
      if (d >= base || v > (INT64_MAX - d) / base) {
        return absl::FailedPreconditionError(absl::StrCat("#if holds the literal '", s, "'"));
      }
      v = v * base + d;
    }
    return v;
  }

  bool Is(const char* op) const { return pos_ < toks_.size() && !toks_[pos_].number && toks_[pos_].op == op; }
  void Fail(const std::string& why) {
    if (error_.empty()) error_ = why;
  }

  int64_t Conditional() {
    const int64_t c = Binary(1);
    if (!Is("?")) return c;
    ++pos_;
    const int64_t a = Conditional();
    if (!Is(":")) { Fail("?: without :"); return 0; }
    ++pos_;
    const int64_t b = Conditional();
    return c ? a : b;
  }

  static int Precedence(const std::string& op) {
    static const std::map<std::string, int> kPrec = {
        {"||", 1}, {"&&", 2}, {"|", 3}, {"^", 4}, {"&", 5}, {"==", 6}, {"!=", 6}, {"<", 7},
        {">", 7}, {"<=", 7}, {">=", 7}, {"<<", 8}, {">>", 8}, {"+", 9}, {"-", 9}, {"*", 10},
        {"/", 10}, {"%", 10}};
    auto it = kPrec.find(op);
    return it == kPrec.end() ? 0 : it->second;
  }

  int64_t Binary(int min_prec) {
    int64_t lhs = Unary();
    while (pos_ < toks_.size() && !toks_[pos_].number) {
      const std::string op = toks_[pos_].op;
      const int prec = Precedence(op);
      if (prec == 0 || prec < min_prec) break;
      ++pos_;
      const int64_t rhs = Binary(prec + 1);
      lhs = Apply(op, lhs, rhs);
    }
    return lhs;
  }

  int64_t Apply(const std::string& op, int64_t a, int64_t b) {
    if (op == "||") return a || b;
    if (op == "&&") return a && b;
    if (op == "|") return a | b;
    if (op == "^") return a ^ b;
    if (op == "&") return a & b;
    if (op == "==") return a == b;
    if (op == "!=") return a != b;
    if (op == "<") return a < b;
    if (op == ">") return a > b;
    if (op == "<=") return a <= b;
    if (op == ">=") return a >= b;
    if (op == "<<" || op == ">>") {
      if (b < 0 || b > 62) { Fail("#if shift out of range"); return 0; }
      return op == "<<" ? a << b : a >> b;
    }
    if (op == "+") return a + b;
    if (op == "-") return a - b;
    if (op == "*") return a * b;
    if (b == 0) { Fail("#if divides by zero"); return 0; }
    return op == "/" ? a / b : a % b;
  }

  int64_t Unary() {
    if (pos_ >= toks_.size()) { Fail("#if expression ends early"); return 0; }
    const Tok t = toks_[pos_++];
    if (t.number) return t.value;
    if (t.op == "!") return !Unary();
    if (t.op == "~") return ~Unary();
    if (t.op == "-") return -Unary();
    if (t.op == "+") return Unary();
    if (t.op == "(") {
      const int64_t v = Conditional();
      if (!Is(")")) { Fail("#if ( without )"); return 0; }
      ++pos_;
      return v;
    }
    Fail(absl::StrCat("#if: unexpected '", t.op, "'"));
    return 0;
  }

  const Macros& macros_;
  std::vector<Tok> toks_;
  size_t pos_ = 0;
  std::string error_;
};

// "NAME body" or "NAME(params) body" -> the macro; empty name if malformed.
std::pair<std::string, Macro> ParseDefine(const std::string& rest) {
  Macro m;
  const std::string name = LeadingIdent(rest);
  m.definition = rest;
  size_t i = name.size();
  if (i < rest.size() && rest[i] == '(') {
    m.function_like = true;
    i = rest.find(')', i);
    i = i == std::string::npos ? rest.size() : i + 1;
  }
  m.body = std::string(absl::StripAsciiWhitespace(absl::string_view(rest).substr(std::min(i, rest.size()))));
  return {name, m};
}

// The global-scope declarators of `t` (see UnitySource::global_names): an
// identifier after a type-like token (an identifier or keyword, >, *, &) and
// before ( = ; [ {; after struct/class/union/enum (and before { ; :) a type.
void CollectGlobalNames(const std::vector<lex::Token>& t, std::set<std::string>* names,
                        std::set<std::string>* types) {
  int depth = 0;
  auto punct = [&](size_t k, std::initializer_list<const char*> any) {
    return k < t.size() && t[k].kind == lex::Token::kPunct &&
           std::any_of(any.begin(), any.end(), [&](const char* p) { return t[k].text == p; });
  };
  for (size_t k = 0; k < t.size(); ++k) {
    if (t[k].kind == lex::Token::kPunct) {
      if (t[k].text == "{") ++depth;
      if (t[k].text == "}") depth = std::max(0, depth - 1);
      continue;
    }
    if (depth != 0 || k == 0 || t[k].kind != lex::Token::kIdentifier) continue;
    const std::string& id = t[k].text;
    if (IsKeyword(id) || absl::StartsWith(id, "__")) continue;
    const lex::Token& prev = t[k - 1];
    const bool class_key = prev.kind == lex::Token::kIdentifier &&
                           (prev.text == "struct" || prev.text == "class" || prev.text == "union" ||
                            prev.text == "enum");
    if (class_key && punct(k + 1, {"{", ";", ":"})) {
      types->insert(id);
    } else if ((prev.kind == lex::Token::kIdentifier || punct(k - 1, {">", "*", "&"})) &&
               punct(k + 1, {"(", "=", ";", "[", "{"})) {
      names->insert(id);
    }
  }
  for (const std::string& type : *types) names->erase(type);
}

}  // namespace

UnitySource::UnitySource(absl::string_view source) { ReadPreamble(source); }

void UnitySource::ReadPreamble(absl::string_view source) {
  const std::vector<lex::LogicalLine> lines = lex::SplitLogicalLines(source);
  size_t last_include = 0;
  bool any_include = false;
  std::set<std::string> defined, undefined, globals, types;
  std::vector<lex::Token> code_after;
  for (size_t k = 0; k < lines.size(); ++k) {
    std::string name, rest;
    if (!lex::ParseDirective(lines[k].text, &name, &rest)) continue;
    if (name == "include") last_include = k, any_include = true;
  }
  static const std::set<std::string> kPlain = {"define", "undef", "include", "if", "ifdef",
                                               "ifndef", "elif", "else", "endif", "error",
                                               "warning", "pragma", "line", ""};
  for (size_t k = 0; k < lines.size(); ++k) {
    const lex::LogicalLine& l = lines[k];
    if (absl::StrContains(l.text, "__COUNTER__") || absl::StrContains(l.text, "__BASE_FILE__")) {
      ineligible_ = absl::StrCat("line ", l.line, " uses __COUNTER__ or __BASE_FILE__");
      return;
    }
    std::string name, rest;
    const bool in_preamble = any_include && k <= last_include;
    if (!lex::ParseDirective(l.text, &name, &rest)) {
      if (in_preamble && !absl::StripAsciiWhitespace(l.text).empty()) {
        ineligible_ = absl::StrCat("line ", l.line, ": code before the last #include");
        return;
      }
      if (!in_preamble) lex::Tokenize(l, &code_after);
      continue;
    }
    if (kPlain.count(name) == 0) {
      ineligible_ = absl::StrCat("line ", l.line, ": #", name);
      return;
    }
    if (name == "define") defined.insert(LeadingIdent(rest));
    if (name == "undef") undefined.insert(LeadingIdent(rest));
    if (in_preamble) preamble_.push_back({name, rest, l.line});
  }
  for (const std::string& u : undefined) {
    if (!IsAnvil(u) && defined.count(u) == 0) {
      ineligible_ = absl::StrCat("#undef ", u, ": a macro the source does not define");
      return;
    }
  }
  CollectGlobalNames(code_after, &globals, &types);
  defined.erase("");
  defined_.assign(defined.begin(), defined.end());
  global_names_.assign(globals.begin(), globals.end());
  global_types_.assign(types.begin(), types.end());
}

namespace {

// One #include of the prelude, preceded by what the header sees of the
// source's own macros at that point (the -D knobs are all ANVIL_, which no
// allowed header reads): #undef / #define of what changed since the last.
absl::Status EmitInclude(const std::string& header, const Macros& macros,
                         std::map<std::string, std::string>& emitted, std::string& out) {
  std::map<std::string, std::string> want;
  for (const auto& [name, m] : macros) {
    if (IsAnvil(name)) continue;
    if (absl::StrContains(m.definition, "ANVIL_")) {
      return absl::FailedPreconditionError(absl::StrCat("the header sees ", name, ", which refers to a knob"));
    }
    want[name] = m.definition;
  }
  for (const auto& [name, def] : emitted) {
    auto w = want.find(name);
    if (w == want.end() || w->second != def) absl::StrAppend(&out, "#undef ", name, "\n");
  }
  for (const auto& [name, def] : want) {
    auto e = emitted.find(name);
    if (e == emitted.end() || e->second != def) absl::StrAppend(&out, "#define ", def, "\n");
  }
  emitted = std::move(want);
  absl::StrAppend(&out, "#include ", header, "\n");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> UnitySource::Prelude(const MacroDefines& defines) const {
  if (!ineligible_.empty()) return absl::FailedPreconditionError(ineligible_);
  Macros macros;
  for (const auto& [name, body] : defines) macros[name] = Macro{false, body, absl::StrCat(name, " ", body)};
  struct Cond {
    bool active;       // this branch is being read
    bool taken;        // a branch of this #if has been read
    bool outer_active; // the enclosing branch is being read
  };
  std::vector<Cond> conds;
  std::map<std::string, std::string> emitted;  // non-ANVIL_ macros the prelude has defined
  std::string out;
  auto fail = [](const Directive& d, absl::string_view why) {
    return absl::FailedPreconditionError(absl::StrCat("line ", d.line, ": ", why));
  };
  for (const Directive& d : preamble_) {
    const bool active = conds.empty() || conds.back().active;
    if (d.name == "if" || d.name == "ifdef" || d.name == "ifndef") {
      bool value = false;
      if (active) {
        std::string expr = d.rest;
        if (d.name != "if") expr = absl::StrCat(d.name == "ifndef" ? "!" : "", "defined(", LeadingIdent(d.rest), ")");
        absl::StatusOr<bool> v = Expression(macros).Evaluate(expr);
        if (!v.ok()) return fail(d, v.status().message());
        value = *v;
      }
      conds.push_back({active && value, active && value, active});
      continue;
    }
    if (d.name == "elif" || d.name == "else" || d.name == "endif") {
      if (conds.empty()) return fail(d, absl::StrCat("#", d.name, " without #if"));
      Cond& c = conds.back();
      if (d.name == "endif") {
        conds.pop_back();
      } else if (!c.outer_active || c.taken) {
        c.active = false;
      } else if (d.name == "else") {
        c.active = c.taken = true;
      } else {
        absl::StatusOr<bool> v = Expression(macros).Evaluate(d.rest);
        if (!v.ok()) return fail(d, v.status().message());
        c.active = c.taken = *v;
      }
      continue;
    }
    if (!active) continue;
    if (d.name == "error") return fail(d, absl::StrCat("#error ", d.rest));
    if (d.name == "define") {
      auto [name, m] = ParseDefine(d.rest);
      if (name.empty()) return fail(d, "malformed #define");
      macros[name] = m;
    } else if (d.name == "undef") {
      macros.erase(LeadingIdent(d.rest));
    } else if (d.name == "include") {
      if (d.rest.empty() || (d.rest[0] != '<' && d.rest[0] != '"')) return fail(d, "computed #include");
      absl::Status st = EmitInclude(d.rest, macros, emitted, out);
      if (!st.ok()) return fail(d, st.message());
    }
    // pragma, warning, line: nothing a header sees.
  }
  for (const auto& [name, def] : emitted) absl::StrAppend(&out, "#undef ", name, "\n");
  return out;
}

}  // namespace anvil
