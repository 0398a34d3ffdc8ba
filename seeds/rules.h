// Integer expressions of seed.json: constraint rules ("ANVIL_BM % 64 == 0 &&
// ...") and cost-model terms. C semantics over int64: + - * / % == != < <= >
// >= && || ! unary -, parentheses, and min(a, b) / max(a, b). Identifiers are
// looked up in a variable map (ANVIL_<KNOB>, ANVIL_LAYOUT_NT, ANVIL_LAYOUT_NN).
// Division or remainder by zero and unknown identifiers are evaluation errors.
// An Expr is immutable after parsing; Eval is thread-safe.
#ifndef ANVIL_SEEDS_RULES_H_
#define ANVIL_SEEDS_RULES_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace anvil {

using RuleVars = std::map<std::string, int64_t>;

class Expr {
 public:
  struct Node;
  // Parses `text`; InvalidArgument names the position of the first error.
  static absl::StatusOr<Expr> Parse(const std::string& text);

  absl::StatusOr<int64_t> Eval(const RuleVars& vars) const;
  // Identifiers the expression reads, sorted, without repeats.
  const std::vector<std::string>& variables() const { return variables_; }
  const std::string& text() const { return text_; }

 private:
  std::string text_;
  std::shared_ptr<const Node> root_;
  std::vector<std::string> variables_;
};

}  // namespace anvil

#endif  // ANVIL_SEEDS_RULES_H_
