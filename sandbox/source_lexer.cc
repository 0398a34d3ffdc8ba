// The source policy's lexer. See source_lexer.h.
#include "sandbox/source_lexer.h"

#include <cctype>

#include "absl/strings/ascii.h"

namespace anvil::sandbox::internal {
namespace {

bool IsIdent(char c) { return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Backslash-newline removed; line_of[i] is the physical line of spliced[i].
void Splice(absl::string_view src, std::string* out, std::vector<int>* line_of) {
  int line = 1;
  for (size_t i = 0; i < src.size(); ++i) {
    if (src[i] == '\\' && i + 1 < src.size() && src[i + 1] == '\n') {
      ++i;
      ++line;
      continue;
    }
    if (src[i] == '\\' && i + 2 < src.size() && src[i + 1] == '\r' && src[i + 2] == '\n') {
      i += 2;
      ++line;
      continue;
    }
    out->push_back(src[i]);
    line_of->push_back(line);
    if (src[i] == '\n') ++line;
  }
}

// The identifier that ends just before position i, e.g. "u8R" before '"'.
std::string IdentBefore(const std::string& s, size_t i) {
  size_t b = i;
  while (b > 0 && IsIdent(s[b - 1])) --b;
  return s.substr(b, i - b);
}

bool IsDigitSeparator(const std::string& s, size_t i) {
  size_t b = i;
  while (b > 0 && (IsIdent(s[b - 1]) || s[b - 1] == '\'' || s[b - 1] == '.')) --b;
  return b < i && absl::ascii_isdigit(static_cast<unsigned char>(s[b])) && i + 1 < s.size() &&
         IsIdent(s[i + 1]);
}

// Blanks comments (keeping newlines) and folds newlines inside raw strings,
// so that every '\n' left ends a logical line.
class CommentStripper {
 public:
  explicit CommentStripper(const std::string& s) : s_(s) {}

  std::string Run() {
    for (i_ = 0; i_ < s_.size(); ++i_) {
      const char c = s_[i_];
      const char next = i_ + 1 < s_.size() ? s_[i_ + 1] : '\0';
      switch (state_) {
        case kCode: Code(c, next); break;
        case kLine:
          out_ += c == '\n' ? '\n' : ' ';
          if (c == '\n') state_ = kCode;
          break;
        case kBlock:
          if (c == '*' && next == '/') state_ = kCode, out_ += "  ", ++i_;
          else out_ += c == '\n' ? '\n' : ' ';
          break;
        case kString:
        case kChar: Quoted(c, next); break;
        case kRaw: Raw(c); break;
      }
    }
    return out_;
  }

 private:
  void Code(char c, char next) {
    if (c == '/' && next == '/') {
      state_ = kLine, out_ += ' ';
    } else if (c == '/' && next == '*') {
      state_ = kBlock, out_ += "  ", ++i_;
    } else if (c == '"') {
      const std::string p = IdentBefore(s_, i_);
      const bool raw = p == "R" || p == "u8R" || p == "uR" || p == "UR" || p == "LR";
      const size_t paren = raw ? s_.find('(', i_) : std::string::npos;
      if (paren != std::string::npos) closing_ = ")" + s_.substr(i_ + 1, paren - i_ - 1) + "\"";
      state_ = paren != std::string::npos ? kRaw : kString;
      out_ += c;
    } else {
      if (c == '\'' && !IsDigitSeparator(s_, i_)) state_ = kChar;
      out_ += c;
    }
  }

  void Quoted(char c, char next) {
    out_ += c;
    if (c == '\\' && next != '\0' && next != '\n') {
      out_ += next, ++i_;
    } else if ((state_ == kString && c == '"') || (state_ == kChar && c == '\'') || c == '\n') {
      state_ = kCode;
    }
  }

  void Raw(char c) {
    if (s_.compare(i_, closing_.size(), closing_) == 0) {
      out_ += closing_;
      i_ += closing_.size() - 1;
      state_ = kCode;
    } else {
      out_ += c == '\n' ? ' ' : c;
    }
  }

  const std::string& s_;
  size_t i_ = 0;
  enum { kCode, kLine, kBlock, kString, kChar, kRaw } state_ = kCode;
  std::string out_;
  std::string closing_;  // ends the raw string being read: )delim"
};

size_t ReadQuoted(const std::string& t, size_t i, char quote, std::string* content) {
  size_t j = i + 1;
  while (j < t.size() && t[j] != quote) {
    if (t[j] == '\\' && j + 1 < t.size()) ++j;
    ++j;
  }
  *content = t.substr(i + 1, j - i - 1);
  return j < t.size() ? j + 1 : j;
}

size_t ReadRaw(const std::string& t, size_t i, std::string* content) {
  const size_t paren = t.find('(', i);
  if (paren == std::string::npos) return ReadQuoted(t, i, '"', content);
  const std::string closing = ")" + t.substr(i + 1, paren - i - 1) + "\"";
  const size_t end = t.find(closing, paren);
  *content = t.substr(paren + 1, (end == std::string::npos ? t.size() : end) - paren - 1);
  return end == std::string::npos ? t.size() : end + closing.size();
}

size_t ReadNumber(const std::string& t, size_t i) {
  size_t j = i + 1;
  while (j < t.size()) {
    const char c = t[j];
    const char prev = t[j - 1];
    if (IsIdent(c) || c == '.' || c == '\'') ++j;
    else if ((c == '+' || c == '-') && (prev == 'e' || prev == 'E' || prev == 'p' || prev == 'P')) ++j;
    else break;
  }
  return j;
}

// An identifier, or a literal with an encoding prefix (u8"...", R"x(...)x").
size_t ReadWord(const std::string& t, size_t i, Token* tok) {
  size_t j = i;
  while (j < t.size() && IsIdent(t[j])) ++j;
  const std::string id = t.substr(i, j - i);
  const bool raw = id == "R" || id == "u8R" || id == "uR" || id == "UR" || id == "LR";
  const bool prefix = id == "u8" || id == "u" || id == "U" || id == "L";
  if (j < t.size() && t[j] == '"' && (raw || prefix)) {
    tok->kind = Token::kString;
    return raw ? ReadRaw(t, j, &tok->text) : ReadQuoted(t, j, '"', &tok->text);
  }
  if (j < t.size() && t[j] == '\'' && prefix) {
    tok->kind = Token::kChar;
    return ReadQuoted(t, j, '\'', &tok->text);
  }
  tok->kind = Token::kIdentifier;
  tok->text = id;
  return j;
}

size_t ReadToken(const std::string& t, size_t i, Token* tok) {
  const char c = t[i];
  const auto digit = [](char x) { return absl::ascii_isdigit(static_cast<unsigned char>(x)); };
  if (IsIdent(c) && !digit(c)) return ReadWord(t, i, tok);
  if (digit(c) || (c == '.' && i + 1 < t.size() && digit(t[i + 1]))) {
    tok->kind = Token::kNumber;
    const size_t j = ReadNumber(t, i);
    tok->text = t.substr(i, j - i);
    return j;
  }
  if (c == '"' || c == '\'') {
    tok->kind = c == '"' ? Token::kString : Token::kChar;
    return ReadQuoted(t, i, c, &tok->text);
  }
  tok->kind = Token::kPunct;
  const bool two = t.compare(i, 2, "::") == 0 || t.compare(i, 2, "->") == 0;
  tok->text = t.substr(i, two ? 2 : 1);
  return i + tok->text.size();
}

}  // namespace

std::vector<LogicalLine> SplitLogicalLines(absl::string_view source) {
  std::string spliced;
  std::vector<int> line_of;
  Splice(source, &spliced, &line_of);
  const std::string code = CommentStripper(spliced).Run();
  std::vector<LogicalLine> lines;
  LogicalLine current;
  current.line = 1;
  for (size_t i = 0; i < code.size(); ++i) {
    if (code[i] == '\n') {
      lines.push_back(std::move(current));
      current = LogicalLine();
      current.line = i + 1 < line_of.size() ? line_of[i + 1] : line_of[i] + 1;
      continue;
    }
    current.text += code[i];
    current.line_of.push_back(line_of[i]);
  }
  if (!current.text.empty()) lines.push_back(std::move(current));
  return lines;
}

bool ParseDirective(const std::string& text, std::string* name, std::string* rest) {
  size_t i = text.find_first_not_of(" \t\r\f\v");
  if (i == std::string::npos) return false;
  if (text[i] == '#') ++i;
  else if (text.compare(i, 2, "%:") == 0) i += 2;  // digraph for '#'
  else return false;
  i = text.find_first_not_of(" \t\r\f\v", i);
  size_t end = i;
  while (end != std::string::npos && end < text.size() && IsIdent(text[end])) ++end;
  *name = i == std::string::npos ? "" : text.substr(i, end - i);
  *rest = end == std::string::npos ? "" : std::string(absl::StripAsciiWhitespace(text.substr(end)));
  return true;
}

void Tokenize(const LogicalLine& line, std::vector<Token>* out) {
  const std::string& t = line.text;
  size_t i = 0;
  while (i < t.size()) {
    if (absl::ascii_isspace(static_cast<unsigned char>(t[i]))) {
      ++i;
      continue;
    }
    Token tok;
    tok.line = line.line_of.empty() ? line.line : line.line_of[i];
    i = ReadToken(t, i, &tok);
    out->push_back(std::move(tok));
  }
}

}  // namespace anvil::sandbox::internal
