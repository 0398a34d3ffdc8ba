// A small C++ lexer for the source policy: joins backslash-continued lines,
// removes comments, splits directives from code, and tokenizes code into
// identifiers, literals and punctuation, each with its physical line number.
// It is not a preprocessor: macros are not expanded (that is the policy's
// known blind spot). Internal to the sandbox, and read by the builder to
// decide which candidates may share a unity build (worker/unity_source.cc).
//
// Thread-safety: pure functions.
#ifndef ANVIL_SANDBOX_SOURCE_LEXER_H_
#define ANVIL_SANDBOX_SOURCE_LEXER_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace anvil::sandbox::internal {

// One logical line (continuations joined) with comments replaced by spaces.
struct LogicalLine {
  std::string text;
  int line = 0;  // physical line where it starts (1-based)
  std::vector<int> line_of;  // physical line of each character of text
};
std::vector<LogicalLine> SplitLogicalLines(absl::string_view source);

// For a directive line ("#include <x>", "%: pragma once"): its name and the
// text after it. False for other lines.
bool ParseDirective(const std::string& text, std::string* name, std::string* rest);

struct Token {
  enum Kind { kIdentifier, kString, kChar, kNumber, kPunct } kind = kPunct;
  std::string text;  // identifiers and punctuation as written; literals: their content
  int line = 0;
};
// Tokenizes code (directives must be removed first); raw strings supported.
void Tokenize(const LogicalLine& line, std::vector<Token>* out);

}  // namespace anvil::sandbox::internal

#endif  // ANVIL_SANDBOX_SOURCE_LEXER_H_
