#include "server/proposers/embedded/learned/learned_model.h"

#include <xgboost/c_api.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace anvil {
namespace {

constexpr float kMissing = std::numeric_limits<float>::quiet_NaN();
constexpr const char* kTerms[] = {"tile_m", "tile_n", "tile_k", "split_k"};
constexpr const char* kBounds[] = {"compute", "l2", "dram", "latency"};

float Log2(double x) { return static_cast<float>(std::log2(std::max(x, 1e-9))); }

absl::Status XgbError(const char* what) { return absl::InternalError(absl::StrCat(what, ": ", XGBGetLastError())); }

// The rows as one dense matrix.
absl::StatusOr<DMatrixHandle> Matrix(const std::vector<std::vector<float>>& x, size_t width) {
  std::vector<float> flat;
  flat.reserve(x.size() * width);
  for (const std::vector<float>& row : x) {
    if (row.size() != width) return absl::InvalidArgumentError("rows of different widths");
    flat.insert(flat.end(), row.begin(), row.end());
  }
  DMatrixHandle m = nullptr;
  if (XGDMatrixCreateFromMat(flat.data(), x.size(), width, kMissing, &m) != 0) return XgbError("XGDMatrixCreateFromMat");
  return m;
}

}  // namespace

size_t FeatureMap::Add(std::string name) {
  names_.push_back(std::move(name));
  return names_.size() - 1;
}

FeatureMap::FeatureMap(const std::vector<SeedFamily>& families) {
  for (const char* n : {"log2_m", "log2_n", "log2_k", "layout_nt", "log2_intensity", "log2_estimate_us",
                        "waste", "log2_ctas", "waves", "last_wave_fill", "log2_partial_bytes", "specialised", "log2_refined_over_estimate"}) {
    Add(n);
  }
  for (const char* b : kBounds) Add(absl::StrCat("bound_", b));
  for (const char* t : kTerms) Add(absl::StrCat("term_", t));
  for (const SeedFamily& f : families) {
    family_.emplace(f.name, Add(absl::StrCat("family_", f.name)));
    for (const SeedKnob& k : f.knobs) {
      if (k.shape.empty()) knob_.emplace(std::pair{f.name, k.name}, Add(absl::StrCat(f.name, ".", k.name)));
    }
  }
}

absl::StatusOr<std::vector<float>> FeatureMap::Of(const SeedFamily& family, v1::Layout layout,
                                                  const KnobParams& params, const v1::Shape& shape,
                                                  const DeviceModel& device, double* estimate_us,
                                                  double refined_us) const {
  absl::StatusOr<Estimate> e = Predict(family, layout, params, shape, device);
  if (!e.ok()) return e.status();
  absl::StatusOr<RuleVars> vars = KnobVars(family, layout, params);
  if (!vars.ok()) return vars.status();
  *estimate_us = e->us;
  const double m = double(shape.m()), n = double(shape.n()), k = double(shape.k());
  std::vector<float> x(names_.size(), kMissing);
  size_t i = 0;
  x[i++] = Log2(m), x[i++] = Log2(n), x[i++] = Log2(k);
  x[i++] = layout == v1::LAYOUT_NT ? 1.f : 0.f;
  x[i++] = Log2(2 * m * n * k / (2 * (m * k + n * k + m * n)));
  x[i++] = Log2(e->us);
  x[i++] = static_cast<float>(e->waste);
  x[i++] = Log2(double(std::max<int64_t>(e->ctas, 1)));
  x[i++] = static_cast<float>(e->waves);
  x[i++] = static_cast<float>(e->waves - std::floor(e->waves));
  x[i++] = Log2(e->partial_bytes + 1);
  x[i++] = IsSpecialised(family, params) ? 1.f : 0.f;
  x[i++] = refined_us > 0 && e->us > 0 ? Log2(refined_us / e->us) : kMissing;
  for (const char* b : kBounds) x[i++] = e->bound == b ? 1.f : 0.f;
  for (const char* t : kTerms) x[i++] = static_cast<float>(ModelTerm(family, *vars, t, 0));
  if (auto f = family_.find(family.name); f != family_.end()) x[f->second] = 1;
  const KnobParams full = WithDefaults(family, params);
  for (const SeedKnob& knob : family.knobs) {
    const auto slot = knob_.find({family.name, knob.name});
    const auto value = full.find(knob.name);
    if (slot == knob_.end() || value == full.end()) continue;
    double v = 0;
    if (absl::SimpleAtod(value->second, &v)) {
      x[slot->second] = static_cast<float>(v);
    } else {
      const auto at = std::find(knob.values.begin(), knob.values.end(), value->second);
      if (at != knob.values.end()) x[slot->second] = static_cast<float>(at - knob.values.begin());
    }
  }
  return x;
}

float TrainingWeight(double measured_us, double problem_best_us, double focus) {
  if (measured_us <= 0 || problem_best_us <= 0) return 0;
  return static_cast<float>(std::pow(std::min(1.0, problem_best_us / measured_us), focus));
}

absl::StatusOr<LearnedModel> LearnedModel::Train(const std::vector<std::vector<float>>& x,
                                                 const std::vector<float>& y, const LearnedOptions& o,
                                                 const std::vector<float>& weights) {
  if (x.empty() || x.size() != y.size()) return absl::InvalidArgumentError("no rows, or not one target per row");
  if (!weights.empty() && weights.size() != y.size()) return absl::InvalidArgumentError("not one weight per row");
  const size_t width = x.front().size();
  absl::StatusOr<DMatrixHandle> m = Matrix(x, width);
  if (!m.ok()) return m.status();
  BoosterHandle b = nullptr;
  absl::Status st;
  if (XGDMatrixSetFloatInfo(*m, "label", y.data(), y.size()) != 0) st = XgbError("label");
  if (st.ok() && !weights.empty() && XGDMatrixSetFloatInfo(*m, "weight", weights.data(), weights.size()) != 0) {
    st = XgbError("weight");
  }
  if (st.ok() && XGBoosterCreate(&*m, 1, &b) != 0) st = XgbError("XGBoosterCreate");
  const std::pair<const char*, std::string> params[] = {
      {"objective", "reg:squarederror"}, {"tree_method", "hist"},
      {"max_depth", absl::StrCat(o.max_depth)}, {"eta", absl::StrCat(o.eta)},
      {"subsample", absl::StrCat(o.subsample)}, {"nthread", absl::StrCat(o.threads)},
      {"seed", absl::StrCat(o.seed)}, {"verbosity", "0"}};
  for (const auto& [name, value] : params) {
    if (st.ok() && XGBoosterSetParam(b, name, value.c_str()) != 0) st = XgbError(name);
  }
  for (int r = 0; st.ok() && r < o.rounds; ++r) {
    if (XGBoosterUpdateOneIter(b, r, *m) != 0) st = XgbError("XGBoosterUpdateOneIter");
  }
  XGDMatrixFree(*m);
  if (!st.ok()) {
    if (b) XGBoosterFree(b);
    return st;
  }
  return LearnedModel(b, width);
}

LearnedModel& LearnedModel::operator=(LearnedModel&& o) noexcept {
  std::swap(booster_, o.booster_);
  width_ = o.width_;
  return *this;
}

LearnedModel::~LearnedModel() {
  if (booster_) XGBoosterFree(booster_);
}

absl::StatusOr<std::vector<float>> LearnedModel::Predict(const std::vector<std::vector<float>>& x) const {
  if (x.empty()) return std::vector<float>();
  absl::StatusOr<DMatrixHandle> m = Matrix(x, width_);
  if (!m.ok()) return m.status();
  bst_ulong n = 0;
  const float* out = nullptr;
  const int rc = XGBoosterPredict(booster_, *m, 0, 0, 0, &n, &out);
  std::vector<float> got;
  if (rc == 0) got.assign(out, out + n);
  XGDMatrixFree(*m);
  if (rc != 0) return XgbError("XGBoosterPredict");
  return got;
}

}  // namespace anvil
