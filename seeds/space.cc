#include "seeds/space.h"

#include <algorithm>
#include <cstdint>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace anvil {
namespace {

std::string Var(const std::string& knob) { return "ANVIL_" + knob; }

RuleVars LayoutVars(v1::Layout layout) {
  return {{"ANVIL_LAYOUT_NT", layout == v1::LAYOUT_NT ? 1 : 0},
          {"ANVIL_LAYOUT_NN", layout == v1::LAYOUT_NN ? 1 : 0}};
}

// Depth-first enumeration over knob values; each rule is evaluated as soon as
// every variable it reads is assigned, so illegal subtrees are cut early.
class Enumerator {
 public:
  Enumerator(const SeedFamily& f, v1::Layout layout, bool with_late, size_t limit)
      : f_(f), limit_(limit), vars_(LayoutVars(layout)) {
    for (const SeedKnob& k : f.knobs) {
      std::vector<std::pair<std::string, int64_t>> values;
      std::vector<std::string> texts = !k.searched || (k.late && !with_late)
                                           ? std::vector<std::string>{k.default_value}
                                           : k.values;
      if (texts.empty()) texts = {k.default_value};
      for (const std::string& t : texts) {
        int64_t v = 0;
        if (absl::SimpleAtoi(t, &v)) values.emplace_back(t, v);
      }
      knobs_.push_back({k.name, std::move(values)});
    }
    // rules_at_[d]: the rules whose last variable is assigned at depth d.
    rules_at_.resize(knobs_.size() + 1);
    for (const SeedRule& r : f.constraints) {
      size_t depth = 0;
      for (const std::string& v : r.expr.variables()) {
        for (size_t i = 0; i < knobs_.size(); ++i) {
          if (Var(knobs_[i].first) == v) depth = std::max(depth, i + 1);
        }
      }
      rules_at_[depth].push_back(&r.expr);
    }
  }

  std::vector<KnobParams> Run() {
    if (Holds(0)) Walk(0);
    return std::move(out_);
  }

 private:
  bool Holds(size_t depth) {
    for (const Expr* e : rules_at_[depth]) {
      absl::StatusOr<int64_t> v = e->Eval(vars_);
      if (!v.ok() || *v == 0) return false;
    }
    return true;
  }
  void Walk(size_t i) {
    if (out_.size() >= limit_) return;
    if (i == knobs_.size()) {
      out_.push_back(params_);
      return;
    }
    const auto& [name, values] = knobs_[i];
    for (const auto& [text, v] : values) {
      vars_[Var(name)] = v;
      params_[name] = text;
      if (Holds(i + 1)) Walk(i + 1);
    }
    vars_.erase(Var(name));
    params_.erase(name);
  }

  const SeedFamily& f_;
  size_t limit_;
  RuleVars vars_;
  KnobParams params_;
  std::vector<std::pair<std::string, std::vector<std::pair<std::string, int64_t>>>> knobs_;
  std::vector<std::vector<const Expr*>> rules_at_;
  std::vector<KnobParams> out_;
};

}  // namespace

KnobParams WithDefaults(const SeedFamily& family, const KnobParams& params) {
  KnobParams all;
  for (const SeedKnob& k : family.knobs) all[k.name] = k.default_value;
  for (const auto& [k, v] : params) all[k] = v;
  return all;
}

std::string ConfigKey(const SeedFamily& family, v1::Layout layout, const KnobParams& params) {
  std::string key = absl::StrCat(family.name, "/", layout == v1::LAYOUT_NN ? "nn" : "nt");
  for (const auto& [k, v] : WithDefaults(family, params)) absl::StrAppend(&key, "/", k, "=", v);
  return key;
}

absl::StatusOr<RuleVars> KnobVars(const SeedFamily& family, v1::Layout layout,
                                  const KnobParams& params) {
  RuleVars vars = LayoutVars(layout);
  for (const auto& [k, text] : WithDefaults(family, params)) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(text, &v)) {
      return absl::InvalidArgumentError(absl::StrCat("knob ", k, "=", text, " is not an integer"));
    }
    vars[Var(k)] = v;
  }
  return vars;
}

absl::Status CheckConfig(const SeedFamily& family, v1::Layout layout, const KnobParams& params) {
  for (const auto& [name, value] : params) {
    auto k = std::find_if(family.knobs.begin(), family.knobs.end(),
                          [&](const SeedKnob& s) { return s.name == name; });
    if (k == family.knobs.end()) {
      return absl::InvalidArgumentError(absl::StrCat(family.name, " has no knob ", name));
    }
    if (!k->values.empty() && std::find(k->values.begin(), k->values.end(), value) == k->values.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(family.name, ": ", name, "=", value, " is outside its legal values (", k->reason, ")"));
    }
    int64_t dim = 0;
    if (!k->shape.empty() && (!absl::SimpleAtoi(value, &dim) || dim < 0 || dim > INT32_MAX)) {
      return absl::InvalidArgumentError(absl::StrCat(family.name, ": ", name, "=", value,
                                                     " is not 0 (any shape) or a dimension"));
    }
  }
  absl::StatusOr<RuleVars> vars = KnobVars(family, layout, params);
  if (!vars.ok()) return vars.status();
  for (const SeedRule& r : family.constraints) {
    absl::StatusOr<int64_t> v = r.expr.Eval(*vars);
    if (!v.ok()) return v.status();
    if (*v == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(family.name, ": breaks \"", r.expr.text(), "\" (", r.reason, ")"));
    }
  }
  return absl::OkStatus();
}

std::vector<KnobParams> LegalConfigs(const SeedFamily& family, v1::Layout layout, bool with_late,
                                     size_t limit) {
  return Enumerator(family, layout, with_late, limit).Run();
}

std::vector<KnobParams> Neighbours(const SeedFamily& family, v1::Layout layout,
                                   const KnobParams& params) {
  const KnobParams base = WithDefaults(family, params);
  // Each knob's one-step moves.
  std::vector<std::vector<std::pair<std::string, std::string>>> moves(family.knobs.size());
  for (size_t i = 0; i < family.knobs.size(); ++i) {
    const SeedKnob& k = family.knobs[i];
    if (!k.searched) continue;
    auto at = std::find(k.values.begin(), k.values.end(), base.at(k.name));
    if (at == k.values.end()) continue;
    if (at != k.values.begin()) moves[i].emplace_back(k.name, *(at - 1));
    if (at + 1 != k.values.end()) moves[i].emplace_back(k.name, *(at + 1));
  }
  std::set<KnobParams> seen;
  std::vector<KnobParams> out;
  auto consider = [&](KnobParams p) {
    if (p != base && CheckConfig(family, layout, p).ok() && seen.insert(p).second) out.push_back(p);
  };
  for (size_t i = 0; i < moves.size(); ++i) {
    for (const auto& [k, v] : moves[i]) {
      KnobParams p = base;
      p[k] = v;
      consider(p);
      for (size_t j = i + 1; j < moves.size(); ++j) {
        for (const auto& [k2, v2] : moves[j]) {
          KnobParams q = p;
          q[k2] = v2;
          consider(q);
        }
      }
    }
  }
  return out;
}

std::optional<KnobParams> Specialise(const SeedFamily& family, const KnobParams& params,
                                     const v1::Shape& shape) {
  KnobParams out = WithDefaults(family, params);
  bool any = false;
  for (const SeedKnob& k : family.knobs) {
    if (k.shape.empty()) continue;
    any = true;
    out[k.name] = absl::StrCat(k.shape == "M" ? shape.m() : k.shape == "N" ? shape.n() : shape.k());
  }
  if (!any) return std::nullopt;
  return out;
}

bool IsSpecialised(const SeedFamily& family, const KnobParams& params) {
  for (const SeedKnob& k : family.knobs) {
    if (k.shape.empty()) continue;
    auto it = params.find(k.name);
    if (it != params.end() && it->second != "0") return true;
  }
  return false;
}

int64_t ModelTerm(const SeedFamily& family, const RuleVars& vars, const std::string& term,
                  int64_t fallback) {
  auto it = family.model.find(term);
  if (it == family.model.end()) return fallback;
  absl::StatusOr<int64_t> v = it->second.Eval(vars);
  return v.ok() ? *v : fallback;
}

double ModelConstant(const SeedFamily& family, const std::string& name, double fallback) {
  auto it = family.model_constants.find(name);
  return it == family.model_constants.end() ? fallback : it->second;
}

}  // namespace anvil
