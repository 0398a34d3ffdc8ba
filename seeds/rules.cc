#include "seeds/rules.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "absl/strings/str_cat.h"

namespace anvil {

// A parsed expression: a constant, a variable, or an operator over children.
struct Expr::Node {
  enum Kind { kConst, kVar, kUnary, kBinary, kCall } kind = kConst;
  int64_t value = 0;
  std::string name;  // variable, operator ("+", "&&", "!", ...) or function
  std::vector<std::shared_ptr<const Node>> args;
};

namespace {

using NodePtr = std::shared_ptr<const Expr::Node>;

// Binary operators by precedence level, loosest first.
const std::vector<std::vector<std::string>>& Levels() {
  static const std::vector<std::vector<std::string>> levels = {
      {"||"}, {"&&"}, {"==", "!="}, {"<=", ">=", "<", ">"}, {"+", "-"}, {"*", "/", "%"}};
  return levels;
}

class Parser {
 public:
  explicit Parser(const std::string& text) : s_(text) {}

  absl::StatusOr<NodePtr> ParseAll() {
    absl::StatusOr<NodePtr> n = Binary(0);
    if (!n.ok()) return n;
    Skip();
    if (pos_ != s_.size()) return Error("unexpected text");
    return n;
  }
  std::set<std::string> vars;

 private:
  absl::Status Error(const std::string& what) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " at column ", pos_ + 1, " of \"", s_, "\""));
  }
  void Skip() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool Eat(const std::string& op) {
    Skip();
    if (s_.compare(pos_, op.size(), op) != 0) return false;
    // "<" must not swallow the first half of "<=", "!" of "!=", and so on.
    if (op.size() == 1 && pos_ + 1 < s_.size() && s_[pos_ + 1] == '=' &&
        (op == "<" || op == ">" || op == "!" || op == "=")) {
      return false;
    }
    pos_ += op.size();
    return true;
  }

  absl::StatusOr<NodePtr> Binary(size_t level) {
    if (level == Levels().size()) return Unary();
    absl::StatusOr<NodePtr> left = Binary(level + 1);
    if (!left.ok()) return left;
    for (;;) {
      std::string op;
      for (const std::string& o : Levels()[level]) {
        if (Eat(o)) {
          op = o;
          break;
        }
      }
      if (op.empty()) return left;
      absl::StatusOr<NodePtr> right = Binary(level + 1);
      if (!right.ok()) return right;
      auto n = std::make_shared<Expr::Node>();
      n->kind = Expr::Node::kBinary;
      n->name = op;
      n->args = {*left, *right};
      left = NodePtr(n);
    }
  }

  absl::StatusOr<NodePtr> Unary() {
    for (const char* op : {"-", "!"}) {
      if (Eat(op)) {
        absl::StatusOr<NodePtr> operand = Unary();
        if (!operand.ok()) return operand;
        auto n = std::make_shared<Expr::Node>();
        n->kind = Expr::Node::kUnary;
        n->name = op;
        n->args = {*operand};
        return NodePtr(n);
      }
    }
    return Primary();
  }

  absl::StatusOr<NodePtr> Primary() {
    Skip();
    if (Eat("(")) {
      absl::StatusOr<NodePtr> inner = Binary(0);
      if (!inner.ok()) return inner;
      if (!Eat(")")) return Error("expected ')'");
      return inner;
    }
    auto n = std::make_shared<Expr::Node>();
    if (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
      int64_t v = 0;
      while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
        if (v > (INT64_MAX - 9) / 10) return Error("number too large");
        v = v * 10 + (s_[pos_++] - '0');
      }
      n->value = v;
      return NodePtr(n);
    }
    size_t start = pos_;
    while (pos_ < s_.size() &&
           (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_')) {
      ++pos_;
    }
    if (start == pos_) return Error(pos_ == s_.size() ? "unexpected end" : "unexpected character");
    n->name = s_.substr(start, pos_ - start);
    if (Eat("(")) {
      if (n->name != "min" && n->name != "max") return Error("unknown function " + n->name);
      n->kind = Expr::Node::kCall;
      for (int i = 0; i < 2; ++i) {
        absl::StatusOr<NodePtr> a = Binary(0);
        if (!a.ok()) return a;
        n->args.push_back(*a);
        if (!Eat(i == 0 ? "," : ")")) return Error(i == 0 ? "expected ','" : "expected ')'");
      }
      return NodePtr(n);
    }
    n->kind = Expr::Node::kVar;
    vars.insert(n->name);
    return NodePtr(n);
  }

  const std::string& s_;
  size_t pos_ = 0;
};

absl::StatusOr<int64_t> Evaluate(const Expr::Node& n, const RuleVars& vars) {
  switch (n.kind) {
    case Expr::Node::kConst:
      return n.value;
    case Expr::Node::kVar: {
      auto it = vars.find(n.name);
      if (it == vars.end()) return absl::InvalidArgumentError("unknown variable " + n.name);
      return it->second;
    }
    case Expr::Node::kUnary: {
      absl::StatusOr<int64_t> a = Evaluate(*n.args[0], vars);
      if (!a.ok()) return a;
      return n.name == "-" ? -*a : static_cast<int64_t>(*a == 0);
    }
    case Expr::Node::kCall: {
      absl::StatusOr<int64_t> a = Evaluate(*n.args[0], vars);
      if (!a.ok()) return a;
      absl::StatusOr<int64_t> b = Evaluate(*n.args[1], vars);
      if (!b.ok()) return b;
      return n.name == "min" ? std::min(*a, *b) : std::max(*a, *b);
    }
    case Expr::Node::kBinary:
      break;
  }
  absl::StatusOr<int64_t> a = Evaluate(*n.args[0], vars);
  if (!a.ok()) return a;
  // && and || short-circuit, as in C: "X != 0 && Y / X > 2" is safe.
  if (n.name == "&&" && *a == 0) return 0;
  if (n.name == "||" && *a != 0) return 1;
  absl::StatusOr<int64_t> b = Evaluate(*n.args[1], vars);
  if (!b.ok()) return b;
  const std::string& op = n.name;
  if (op == "&&" || op == "||") return static_cast<int64_t>(*b != 0);
  if (op == "+") return *a + *b;
  if (op == "-") return *a - *b;
  if (op == "*") return *a * *b;
  if (op == "/" || op == "%") {
    if (*b == 0) return absl::InvalidArgumentError("division by zero");
    return op == "/" ? *a / *b : *a % *b;
  }
  if (op == "==") return static_cast<int64_t>(*a == *b);
  if (op == "!=") return static_cast<int64_t>(*a != *b);
  if (op == "<") return static_cast<int64_t>(*a < *b);
  if (op == "<=") return static_cast<int64_t>(*a <= *b);
  if (op == ">") return static_cast<int64_t>(*a > *b);
  return static_cast<int64_t>(*a >= *b);  // ">="
}

}  // namespace

absl::StatusOr<Expr> Expr::Parse(const std::string& text) {
  Parser p(text);
  absl::StatusOr<NodePtr> root = p.ParseAll();
  if (!root.ok()) return root.status();
  Expr e;
  e.text_ = text;
  e.root_ = *root;
  e.variables_.assign(p.vars.begin(), p.vars.end());
  return e;
}

absl::StatusOr<int64_t> Expr::Eval(const RuleVars& vars) const {
  absl::StatusOr<int64_t> v = Evaluate(*root_, vars);
  if (!v.ok()) return absl::InvalidArgumentError(absl::StrCat(v.status().message(), " in \"", text_, "\""));
  return v;
}

}  // namespace anvil
