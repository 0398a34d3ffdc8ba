// A learned cost model: gradient-boosted trees (XGBoost) that correct the
// first-principles estimate (cost_model.h Predict) of a configuration's time
// on a problem, trained on measured configurations of many problems.
//
// Features (FeatureMap): the problem's shape (log2 M, N, K, the layout, the
// arithmetic intensity), the estimate's own account (log2 time, tile waste,
// CTAs, waves and the last wave's fill, the bound, the split-K workspace),
// the family's model terms (tile_m, tile_n, tile_k, split_k), the refined
// estimate over the first-principles one where known, the family
// (one slot each) and each of its knobs (a number, or the value's place in
// the knob's legal values; shape knobs as one "specialised" flag). The
// target is log(measured / estimate): what the trees learn is where the
// first-principles model is wrong, which carries over to shapes it has not
// seen better than raw times do.
//
// Thread-compatible; a model is move-only (it owns the booster).
#ifndef ANVIL_SERVER_PROPOSERS_EMBEDDED_LEARNED_LEARNED_MODEL_H_
#define ANVIL_SERVER_PROPOSERS_EMBEDDED_LEARNED_LEARNED_MODEL_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "seeds/seeds.h"
#include "seeds/space.h"
#include "server/proposers/embedded/cost_model.h"

namespace anvil {

// The feature layout for a set of seed families (fixed once made).
class FeatureMap {
 public:
  explicit FeatureMap(const std::vector<SeedFamily>& families);
  size_t size() const { return names_.size(); }
  const std::vector<std::string>& names() const { return names_; }
  // The features of `params` of `family` on `shape`, and the first-principles
  // estimate (*estimate_us) the model's target is relative to. `refined_us`:
  // the estimate refined by measured neighbours (CostModel::Refined, from
  // other problems' observations), when known (0: missing).
  // InvalidArgument where Predict refuses the configuration.
  absl::StatusOr<std::vector<float>> Of(const SeedFamily& family, v1::Layout layout,
                                        const KnobParams& params, const v1::Shape& shape,
                                        const DeviceModel& device, double* estimate_us,
                                        double refined_us = 0) const;

 private:
  size_t Add(std::string name);
  std::map<std::string, size_t> family_;                           // family -> slot
  std::map<std::pair<std::string, std::string>, size_t> knob_;     // (family, knob) -> slot
  std::vector<std::string> names_;
};

// A row's weight in training: its configuration's time over the fastest
// measured on its problem, to the power -focus. A search keeps what a
// model ranks first, so errors among a problem's fastest cost most: with
// focus 4 a configuration 20% slower than the best weighs 0.48, one twice as
// slow 0.06.
float TrainingWeight(double measured_us, double problem_best_us, double focus = 4);

struct LearnedOptions {
  int rounds = 300;         // boosting rounds
  int max_depth = 6;
  double eta = 0.08;        // learning rate
  double subsample = 0.8;   // rows per tree
  int threads = 2;
  uint64_t seed = 0;        // identical inputs and seed: identical model
};

class LearnedModel {
 public:
  // Trains on rows `x` (each FeatureMap::size() wide) with targets `y`
  // (log(measured / estimate)) and, when given, a weight per row.
  // InvalidArgument when empty or ragged.
  static absl::StatusOr<LearnedModel> Train(const std::vector<std::vector<float>>& x,
                                            const std::vector<float>& y, const LearnedOptions& options,
                                            const std::vector<float>& weights = {});
  LearnedModel(LearnedModel&& o) noexcept : booster_(std::exchange(o.booster_, nullptr)), width_(o.width_) {}
  LearnedModel& operator=(LearnedModel&& o) noexcept;
  LearnedModel(const LearnedModel&) = delete;
  LearnedModel& operator=(const LearnedModel&) = delete;
  ~LearnedModel();

  // The predicted targets of rows `x`.
  absl::StatusOr<std::vector<float>> Predict(const std::vector<std::vector<float>>& x) const;

 private:
  LearnedModel(void* booster, size_t width) : booster_(booster), width_(width) {}
  void* booster_ = nullptr;  // BoosterHandle
  size_t width_ = 0;
};

}  // namespace anvil

#endif  // ANVIL_SERVER_PROPOSERS_EMBEDDED_LEARNED_LEARNED_MODEL_H_
