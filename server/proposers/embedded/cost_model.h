// The embedded proposer's cheap cost model: a roofline and wave-quantisation
// estimate of a seed configuration's device time on a shape, before any nvcc
// time is spent, refined by what has been measured (nearest neighbours over
// measured configurations). It orders and prunes; it never replaces a
// measurement. The per-family terms (tile extents, split-K, CTAs per SM, the
// fraction of an SM one CTA can drive, fixed latency) come from seed.json's
// "model" section, so a new family describes itself: tile_m, tile_n, tile_k,
// split_k, split_in_cluster (nonzero: the splits sum in a cluster, with no
// workspace slabs and no reduce kernel), multicast (CTAs of a cluster that share
// the tile_n operand rows through TMA multicast; 1 = none), multicast_n (those
// that share the tile_m rows), ctas_per_sm,
// cta_rate_permille (the share of an SM's tensor rate one CTA drives),
// pipeline_permille (main-loop efficiency of the ring depth), store_permille (a
// tile's store cost against ideal DRAM-rate stores; 0 = not modelled),
// store_hidden_permille (the share of it hidden behind other work) and variant
// (schedules the model cannot rank apart: the search screens each);
// constants efficiency, fixed_us (launch + prologue + epilogue), step_ns
// (latency floor of one k-step; a term too, where the k-step's width is a knob)
// and misaligned_factor (the slowdown when operand rows are not 16-byte
// multiples). Thread-compatible.
#ifndef ANVIL_SERVER_PROPOSERS_EMBEDDED_COST_MODEL_H_
#define ANVIL_SERVER_PROPOSERS_EMBEDDED_COST_MODEL_H_

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "anvil/v1/types.pb.h"
#include "seeds/space.h"

namespace anvil {

struct DeviceModel {
  int sms = 132;
  double flops_per_s = 7.6e14;   // dense fp16 rate cuBLAS reaches (H100 SXM)
  double dram_bytes_per_s = 3.0e12;
  double l2_bytes_per_s = 1.0e13;  // operand re-reads served by L2 (tile-size pressure)
  // CTAs that clusters of c CTAs (the index) can hold at once, one CTA per SM:
  // a cluster lives on one GPC, and the GPCs' SM counts leave SMs out
  // (cudaOccupancyMaxActiveClusters x c on the 132-SM H100 SXM,
  // measured 2026-11-21: bench/results/2026-11-21-cluster-occupancy-h100.md); 0 = not measured.
  std::array<int, 17> cluster_ctas = {0, 132, 132, 117, 120, 0, 102, 0, 120,
                                      0, 0,   0,   84,  0,   0, 0,   112};
  // The SMs that clusters of c can use at once: the measured share of cluster_ctas,
  // scaled to `sms`; all of them where not measured.
  int64_t ClusterSlots(int64_t c) const;
};

struct Estimate {
  double us = 0;         // predicted device time
  double waste = 0;      // padded tile area / useful area - 1
  int64_t ctas = 0;      // CTAs launched (tiles x split)
  double waves = 0;      // ctas / concurrent CTA slots
  std::string bound;     // "compute", "l2", "dram" or "latency"
  double partial_bytes = 0;  // split-K fp32 partials: the workspace it will ask for (at most)
};

// The estimate from first principles. REQUIRES: a legal configuration
// (CheckConfig); InvalidArgument for a non-integer knob.
absl::StatusOr<Estimate> Predict(const SeedFamily& family, v1::Layout layout,
                                 const KnobParams& params, const v1::Shape& shape,
                                 const DeviceModel& device);

// The distance between two problem shapes the model refines by: the sum of
// |log2| differences of M, N and K (extents below 1 count as 1). Refined
// computes the same from logarithms taken once per observation.
double ShapeDistance(const v1::Shape& a, const v1::Shape& b);

// A measured configuration: its predicted and measured device time.
struct ModelPoint {
  std::string family;
  KnobParams params;
  v1::Shape shape;
  double predicted_us = 0;
  double measured_us = 0;  // 0: failed (not used for refinement)
};

// Predict(), scaled by the measured/predicted ratio of the `k` nearest
// observations of the same family (distance: log2 steps between knob values
// plus log2 distance between shapes), weighted by closeness.
class CostModel {
 public:
  explicit CostModel(DeviceModel device) : device_(device) {}
  void Observe(ModelPoint o);
  absl::StatusOr<Estimate> Refined(const SeedFamily& family, v1::Layout layout,
                                   const KnobParams& params, const v1::Shape& shape,
                                   int k = 4) const;
  const DeviceModel& device() const { return device_; }
  size_t observations() const { return observations_; }

 private:
  // The observations that can refine, by family, with their knob values
  // interned (a slot per knob name, an id per value) and their logarithms
  // taken once, stored by column: Refined compares a configuration with every
  // one of them, thousands of times per round, one knob at a time over all
  // points.
  struct Column {
    std::vector<int> ids;        // [point]: the value's id, -1 absent
    std::vector<double> log2s;   // [point]: log2(max(value, 1)) when a number
    std::vector<char> numeric;   // [point]: the value parses as a number
  };
  struct FamilyPoints {
    std::map<std::string, int> slots;                 // knob name -> slot
    std::vector<std::map<std::string, int>> values;   // [slot]: value -> id
    std::vector<Column> columns;                      // [slot]
    std::vector<double> lm, ln, lk;  // [point]: log2(max(extent, 1)) of the shape
    std::vector<double> log_ratio;   // [point]: log(measured / predicted)
  };
  DeviceModel device_;
  size_t observations_ = 0;
  std::map<std::string, FamilyPoints> families_;
};

}  // namespace anvil

#endif  // ANVIL_SERVER_PROPOSERS_EMBEDDED_COST_MODEL_H_
