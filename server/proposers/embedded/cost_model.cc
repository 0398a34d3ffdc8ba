#include "server/proposers/embedded/cost_model.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/numbers.h"

namespace anvil {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

int64_t DeviceModel::ClusterSlots(int64_t c) const {
  if (c < 1 || c >= static_cast<int64_t>(cluster_ctas.size()) || cluster_ctas[c] <= 0 ||
      cluster_ctas[1] <= 0)
    return sms;
  return std::max<int64_t>(c, static_cast<int64_t>(sms) * cluster_ctas[c] / cluster_ctas[1]);
}

namespace {

// The family's model terms (seed.json's "model" section) for one configuration.
struct Terms {
  int64_t tm, tn, tk, split;
  // The splits of a tile sum their partials inside one cluster (no slabs, no
  // reduce kernel) instead of through the workspace and a second kernel.
  bool in_cluster;
  bool slabs;
  // Stream-K: min(SMs, units) CTAs share the tiles' k-iterations evenly; a tile
  // split between CTAs is summed through fp32 partial tiles in the workspace.
  bool stream_k;
  double stream_k_factor;  // measured: a CTA's scattered units run slower than a tile's k-tiles
  // Clusters of `multicast` CTAs share one operand slice through TMA multicast:
  // each loads 1/multicast of the tile_n rows, and whole clusters must fit a GPC.
  // Two-dimensional clusters: `multicast_n` CTAs share the tile_m rows too.
  int64_t multicast, multicast_n;
  int64_t per_sm;
  double cta_rate;  // the fraction of one SM's tensor throughput a lone CTA can drive
  double efficiency, fixed_us;
  double step_ns;   // one k-step's latency floor
  double pipeline;  // main-loop efficiency of the ring depth (a shallow ring exposes load latency)
  // Storing C tile by tile: the family's store cost (per mille of ideal; 0: not
  // modelled), less the share hidden behind other work.
  double store_cost, store_hidden;
  // The slowdown when operand rows are not 16-byte multiples (1 = handled).
  double misaligned_factor;
};

Terms ReadTerms(const SeedFamily& family, const RuleVars& vars) {
  Terms t;
  t.tm = std::max<int64_t>(1, ModelTerm(family, vars, "tile_m", 128));
  t.tn = std::max<int64_t>(1, ModelTerm(family, vars, "tile_n", 128));
  t.tk = std::max<int64_t>(1, ModelTerm(family, vars, "tile_k", 64));
  t.split = std::max<int64_t>(1, ModelTerm(family, vars, "split_k", 1));
  t.in_cluster = t.split > 1 && ModelTerm(family, vars, "split_in_cluster", 0) != 0;
  t.slabs = t.split > 1 && !t.in_cluster;
  t.stream_k = ModelTerm(family, vars, "stream_k", 0) != 0;
  t.stream_k_factor = ModelConstant(family, "stream_k_factor", 1.0);
  t.multicast = std::max<int64_t>(1, ModelTerm(family, vars, "multicast", 1));
  t.multicast_n = std::max<int64_t>(1, ModelTerm(family, vars, "multicast_n", 1));
  t.per_sm = std::max<int64_t>(1, ModelTerm(family, vars, "ctas_per_sm", 1));
  t.cta_rate = std::clamp<double>(ModelTerm(family, vars, "cta_rate_permille", 1000), 1, 1000) / 1000.0;
  t.efficiency = ModelConstant(family, "efficiency", 0.8);
  t.fixed_us = ModelConstant(family, "fixed_us", 3.0);
  // A constant, or a term where the k-step's width is a knob (03's BK: a slot
  // of two k-tiles costs what two slots of one do).
  t.step_ns = family.model.count("step_ns") > 0 ? static_cast<double>(ModelTerm(family, vars, "step_ns", 40))
                                                : ModelConstant(family, "step_ns", 40.0);
  t.pipeline = std::clamp<double>(ModelTerm(family, vars, "pipeline_permille", 1000), 100, 1000) / 1000.0;
  t.store_cost = ModelTerm(family, vars, "store_permille", 0) / 1000.0;
  t.store_hidden = std::clamp<double>(ModelTerm(family, vars, "store_hidden_permille", 0), 0, 1000) / 1000.0;
  t.misaligned_factor = ModelConstant(family, "misaligned_factor", 1.0);
  return t;
}

// How the tiles fall on the GPU.
struct Schedule {
  int64_t sms;      // SMs taking CTAs at once (a cluster is co-scheduled on one GPC)
  int64_t units;    // stream-K's (tile, k-tile) units
  int64_t k_steps;  // k-steps of one CTA
  int64_t load;     // CTAs the busiest SM runs
};

// Sets e's waste, CTAs and waves.
Schedule Lay(const Terms& t, const v1::Shape& shape, const DeviceModel& device, Estimate& e) {
  const int64_t M = shape.m(), N = shape.n(), K = shape.k();
  Schedule s;
  const int64_t tiles = CeilDiv(M, t.tm) * CeilDiv(N, t.tn);
  e.waste = static_cast<double>(CeilDiv(M, t.tm) * t.tm * CeilDiv(N, t.tn) * t.tn) / (M * N) - 1.0;
  e.ctas = tiles * t.split;
  // A cluster is co-scheduled on one GPC: fewer SMs take clusters at once.
  s.sms = device.ClusterSlots(t.in_cluster ? t.split : t.multicast * t.multicast_n);
  const int64_t slots = s.sms * t.per_sm;
  e.waves = static_cast<double>(e.ctas) / slots;
  const int64_t k_tiles = CeilDiv(K, t.tk);
  s.units = tiles * k_tiles;
  s.k_steps = CeilDiv(k_tiles, t.split);
  // The busiest SM runs ceil(ctas / sms) CTAs, up to per_sm of them at once.
  s.load = CeilDiv(e.ctas, s.sms);
  if (t.stream_k) {  // one CTA per SM, ceil(units / CTAs) k-steps each
    e.ctas = std::min<int64_t>(s.sms, s.units);
    e.waves = static_cast<double>(s.units) / (e.ctas * k_tiles);
    s.k_steps = CeilDiv(s.units, e.ctas);
    s.load = 1;
  }
  return s;
}

// The main loop's and the stores' seconds, with stream-K's fix-up and the
// misaligned-rows penalty.
double BodySeconds(const Terms& t, const Schedule& s, const Estimate& e, const v1::Shape& shape,
                   v1::Layout layout, const DeviceModel& device) {
  const int64_t together = std::min(s.load, t.per_sm);
  const double sm_rate = device.flops_per_s * t.efficiency / device.sms;
  const double cta_flops = 2.0 * t.tm * t.tn * s.k_steps * t.tk;
  const double compute_s = s.load * cta_flops / (sm_rate * std::min(1.0, t.cta_rate * together));
  // A tile's fp16 bytes at the SM's share of DRAM bandwidth, times the store
  // cost. In a cluster each split stores 1/split of the tile after reading that
  // share from every split's partial tile (tm * tn * 4 bytes over the SM-to-SM
  // network, taken at the SM's share of L2 bandwidth).
  const double sm_dram = device.dram_bytes_per_s / device.sms;
  const double store_s =
      t.slabs        ? 0.0
      : t.in_cluster ? s.load * (t.tm * t.tn * 2.0 / t.split / sm_dram +
                                 t.tm * t.tn * 4.0 / (device.l2_bytes_per_s / device.sms))
                     : s.load * t.tm * t.tn * 2.0 / sm_dram * t.store_cost * (1.0 - t.store_hidden);
  double body = compute_s / t.pipeline + store_s;
  // Stream-K's fix-up: when the tiles do not divide evenly, a CTA publishes one
  // fp32 partial tile and the tile's first CTA reads it back (at the SM's share
  // of L2 bandwidth), after a memset of the flags (a quarter of a launch).
  // The family's stream_k_factor scales the rest (measured: a CTA's scattered
  // units run slower than a tile's consecutive k-tiles).
  if (t.stream_k) {
    body *= std::max(1.0, t.stream_k_factor);
    if (s.units % e.ctas != 0) {
      body += 2.0 * t.tm * t.tn * 4.0 / (device.l2_bytes_per_s / device.sms);
      body += t.fixed_us * 0.25e-6;
    }
  }
  // Operand rows that are not 16-byte multiples (K % 8, or NN's N % 8): a
  // family without a fast path for them runs this much slower (constant
  // misaligned_factor; 1 = handled, e.g. by padding into the workspace).
  if (shape.k() % 8 != 0 || (layout == v1::LAYOUT_NN && shape.n() % 8 != 0)) {
    body *= std::max(1.0, t.misaligned_factor);
  }
  return body;
}

// The floors the body cannot go under (k-step latency, L2 and DRAM
// traffic): the largest of the four is the time, and e.bound names it. Sets
// e's partial_bytes.
double Bounded(double body, const Terms& t, const Schedule& s, const v1::Shape& shape,
               const DeviceModel& device, Estimate& e) {
  const int64_t M = shape.m(), N = shape.n(), K = shape.k();
  const double latency_s = CeilDiv(s.load, t.per_sm) * s.k_steps * t.step_ns * 1e-9;
  const double rows_per_k_tile = static_cast<double>(t.tm) / t.multicast_n + static_cast<double>(t.tn) / t.multicast;
  const double l2_s = e.ctas * rows_per_k_tile * s.k_steps * t.tk * 2.0 / device.l2_bytes_per_s;
  // DRAM: operands once, C (or the fp32 partials) once.
  const double c_bytes = t.slabs ? t.split * M * N * 4.0 : M * N * 2.0;
  // The workspace the partials ask for, as the seed families lay their slabs
  // out (03 rounds each up to 256 bytes, 02 adds 16 spare bytes to align the
  // base), at most: the search compares it with the runner's cap, which
  // refuses a byte over.
  e.partial_bytes = t.slabs ? t.split * (CeilDiv(M * N, int64_t{64}) * 256.0) + 16 : 0;
  const double dram_s = ((M * K + N * K) * 2.0 + c_bytes) / device.dram_bytes_per_s;
  e.bound = "compute";
  for (auto [floor, name] : {std::pair{latency_s, "latency"}, {l2_s, "l2"}, {dram_s, "dram"}}) {
    if (floor > body) {
      body = floor;
      e.bound = name;
    }
  }
  return body;
}

}  // namespace

absl::StatusOr<Estimate> Predict(const SeedFamily& family, v1::Layout layout,
                                 const KnobParams& params, const v1::Shape& shape,
                                 const DeviceModel& device) {
  absl::StatusOr<RuleVars> vars = KnobVars(family, layout, params);
  if (!vars.ok()) return vars.status();
  const Terms t = ReadTerms(family, *vars);
  Estimate e;
  const Schedule s = Lay(t, shape, device, e);
  const double body = Bounded(BodySeconds(t, s, e, shape, layout, device), t, s, shape, device, e);
  const int64_t M = shape.m(), N = shape.n();
  e.us = body * 1e6 + t.fixed_us;
  if (t.slabs) {  // the reduce kernel: partials in, fp16 C out, one more launch
    e.us += (t.split * M * N * 4.0 + M * N * 2.0) / device.dram_bytes_per_s * 1e6 + t.fixed_us * 0.5;
  } else if (t.in_cluster) {
    // Measured (H100, 2026-11-21, bench/NOTES.md, Kernel): summing in the cluster saves none of the
    // reduce kernel's time (cluster launch, two cluster barriers, the slowest
    // split pacing the tile), so it is charged like the second launch.
    e.us += t.fixed_us * 0.5;
  }
  return e;
}

double ShapeDistance(const v1::Shape& a, const v1::Shape& b) {
  const auto l = [](int64_t x) { return std::log2(std::max<double>(double(x), 1.0)); };
  return std::abs(l(a.m()) - l(b.m())) + std::abs(l(a.n()) - l(b.n())) + std::abs(l(a.k()) - l(b.k()));
}

void CostModel::Observe(ModelPoint o) {
  ++observations_;
  if (o.measured_us <= 0 || o.predicted_us <= 0) return;  // a failure: nothing to refine with
  FamilyPoints& f = families_[o.family];
  const size_t point = f.log_ratio.size();
  for (Column& c : f.columns) {  // absent unless the point has the knob
    c.ids.push_back(-1);
    c.log2s.push_back(0);
    c.numeric.push_back(0);
  }
  for (const auto& [knob, value] : o.params) {
    const int slot = f.slots.emplace(knob, static_cast<int>(f.slots.size())).first->second;
    if (static_cast<size_t>(slot) >= f.columns.size()) {
      f.values.resize(slot + 1);
      f.columns.resize(slot + 1);
      Column& fresh = f.columns[slot];
      fresh.ids.assign(point + 1, -1);
      fresh.log2s.assign(point + 1, 0);
      fresh.numeric.assign(point + 1, 0);
    }
    Column& c = f.columns[slot];
    c.ids[point] = f.values[slot].emplace(value, static_cast<int>(f.values[slot].size())).first->second;
    double x = 0;
    c.numeric[point] = absl::SimpleAtod(value, &x);
    c.log2s[point] = c.numeric[point] ? std::log2(std::max(x, 1.0)) : 0;
  }
  f.lm.push_back(std::log2(std::max<double>(o.shape.m(), 1.0)));
  f.ln.push_back(std::log2(std::max<double>(o.shape.n(), 1.0)));
  f.lk.push_back(std::log2(std::max<double>(o.shape.k(), 1.0)));
  f.log_ratio.push_back(std::log(o.measured_us / o.predicted_us));
}

// The distance is KnobDistance(the configuration's knobs, the point's) plus
// ShapeDistance(the shapes), summed in the same order as those two would
// (the configuration's knobs by name), so the neighbours and their order are
// theirs exactly.
absl::StatusOr<Estimate> CostModel::Refined(const SeedFamily& family, v1::Layout layout,
                                            const KnobParams& params, const v1::Shape& shape,
                                            int k) const {
  absl::StatusOr<Estimate> e = Predict(family, layout, params, shape, device_);
  if (!e.ok()) return e;
  const auto fam = families_.find(family.name);
  if (fam == families_.end() || fam->second.log_ratio.empty()) return e;
  const FamilyPoints& f = fam->second;
  // Shape knobs left out of the comparison: a configuration specialised to a
  // problem is the general one's kernel (ShapeDistance counts the problem).
  KnobParams full = WithDefaults(family, params);
  for (const SeedKnob& knob : family.knobs) {
    if (!knob.shape.empty()) full.erase(knob.name);
  }
  const size_t points = f.log_ratio.size();
  std::vector<double> d(points, 0.0);
  for (const auto& [knob, value] : full) {
    const auto slot = f.slots.find(knob);
    if (slot == f.slots.end()) continue;  // no point has the knob: it adds nothing
    const auto found = f.values[slot->second].find(value);
    const int id = found == f.values[slot->second].end() ? -1 : found->second;
    double x = 0;
    const bool numeric = absl::SimpleAtod(value, &x);
    const double log2 = numeric ? std::log2(std::max(x, 1.0)) : 0;
    const Column& c = f.columns[slot->second];
    for (size_t i = 0; i < points; ++i) {
      if (c.ids[i] < 0 || c.ids[i] == id) continue;
      d[i] += numeric && c.numeric[i] ? std::max(0.5, std::abs(log2 - c.log2s[i])) : 1;
    }
  }
  const double lm = std::log2(std::max<double>(shape.m(), 1.0));
  const double ln = std::log2(std::max<double>(shape.n(), 1.0));
  const double lk = std::log2(std::max<double>(shape.k(), 1.0));
  std::vector<std::pair<double, double>> near;  // (distance, log ratio)
  near.reserve(points);
  for (size_t i = 0; i < points; ++i) {
    near.emplace_back(d[i] + (std::abs(lm - f.lm[i]) + std::abs(ln - f.ln[i]) + std::abs(lk - f.lk[i])),
                      f.log_ratio[i]);
  }
  const size_t n = std::min<size_t>(k, near.size());
  std::partial_sort(near.begin(), near.begin() + n, near.end());
  double w_sum = 0, acc = 0;
  for (size_t i = 0; i < n; ++i) {
    double w = 1.0 / (1.0 + near[i].first);
    w_sum += w;
    acc += w * near[i].second;
  }
  e->us *= std::exp(acc / w_sum);
  return e;
}

}  // namespace anvil
