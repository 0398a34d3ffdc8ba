// cuBLASLt autotuning of ProblemSession (see session.h): the "cublaslt_auto"
// baseline is the fastest of every algorithm the heuristic returns
// (protocol.lt_auto_algos: 32 asked for by default) plus the stored choices, in
// each figure it is compared by: device time, and the two graph regimes (a
// choice tuned hot is not assumed best cold). A stored choice is used as it is
// unless marked retune, in which case it is one more contender. A screen
// tunes in its own figure only (TuneLtScreen).
#include <algorithm>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "worker/runner/session.h"

namespace anvil::runner {
namespace {

constexpr int kLtTuneRounds = 5;       // timed rounds over the algorithms by device time
constexpr int kLtGraphTuneRounds = 3;  // timed replays per algorithm and regime

bool SameAlgo(const cublasLtMatmulAlgo_t& a, const cublasLtMatmulAlgo_t& b) {
  return std::memcmp(&a, &b, sizeof(a)) == 0;
}

void AddContender(std::vector<cublasLtMatmulAlgo_t>& list, const cublasLtMatmulAlgo_t& algo) {
  if (std::none_of(list.begin(), list.end(), [&](const auto& a) { return SameAlgo(a, algo); }))
    list.push_back(algo);
}

// The index of the lowest median, -1 when no list has samples.
int LowestMedian(std::vector<std::vector<double>>& us) {
  int best = -1;
  double best_us = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < us.size(); ++i) {
    if (us[i].empty()) continue;
    std::sort(us[i].begin(), us[i].end());
    const double median = us[i][us[i].size() / 2];
    if (median < best_us) best_us = median, best = static_cast<int>(i);
  }
  return best;
}

}  // namespace

// A cached choice usable as it is: present, the right size, accepted by cuBLASLt.
std::optional<cublasLtMatmulAlgo_t> ProblemSession::UsableCached(LtGemm& lt,
                                                                  const v1::LtAlgo* cached) {
  if (!cached || cached->algo().size() != sizeof(cublasLtMatmulAlgo_t)) return std::nullopt;
  cublasLtMatmulAlgo_t algo{};
  std::memcpy(&algo, cached->algo().data(), sizeof(algo));
  if (!lt.CheckAlgo(algo).ok()) return std::nullopt;
  return algo;
}

v1::LtAlgo ProblemSession::TunedChoice(const cublasLtMatmulAlgo_t& algo,
                                       const std::string& figure) const {
  v1::LtAlgo out;
  out.mutable_shape()->set_m(shape_.m);
  out.mutable_shape()->set_n(shape_.n);
  out.mutable_shape()->set_k(shape_.k);
  out.set_layout(shape_.layout);
  out.set_algo(std::string(reinterpret_cast<const char*>(&algo), sizeof(algo)));
  out.set_cublas_version(ctx_.cublas_version);
  out.set_gpu(ctx_.gpu);
  out.set_figure(figure);
  return out;
}

// By device time: one untimed call each first (an algorithm's kernels load
// lazily at their first launch), then kLtTuneRounds rounds, each timing every
// algorithm once in a rotated order on fresh inputs (the GPU's clock and power
// state move them all alike; what the previous call left in L2 must not
// decide), each round on another operand set. Timing each algorithm with its
// first launch included once kept one 20% slower than the heuristic's first
// choice on the H100. Returns the winner's index; `us` gets each one's median
// (0 for an algorithm that failed: it must not win by doing nothing).
// `rounds` is kLtTuneRounds, or 1 where the medians only size graph replays.
absl::StatusOr<int> ProblemSession::TuneLtDevice(LtGemm& lt,
                                                 const std::vector<cublasLtMatmulAlgo_t>& algos,
                                                 int rounds, std::vector<double>* medians) {
  std::vector<bool> runs(algos.size(), true);
  std::vector<std::vector<double>> us(algos.size());
  auto timed = [&](size_t i, bool keep) -> absl::Status {
    if (!runs[i]) return absl::OkStatus();
    lt.set_algo(algos[i]);
    if (keep) ANVIL_RETURN_IF_ERROR(Regenerate());
    absl::StatusOr<DeviceCall> call = TimedDeviceCall(lt);
    if (!call.ok()) return call.status();
    ANVIL_CUDA(call->err);
    if (call->rc != 0) runs[i] = false;
    else if (keep) us[i].push_back(call->us());
    return absl::OkStatus();
  };
  ANVIL_RETURN_IF_ERROR(Regenerate());
  for (size_t i = 0; i < algos.size(); ++i) ANVIL_RETURN_IF_ERROR(timed(i, false));
  for (int round = 0; round < rounds; ++round) {
    UseOperandSet(static_cast<size_t>(round));
    for (size_t j = 0; j < algos.size(); ++j) {
      ANVIL_RETURN_IF_ERROR(timed((j + round) % algos.size(), true));
    }
  }
  UseOperandSet(0);
  for (size_t i = 0; i < algos.size(); ++i) us[i].resize(runs[i] ? us[i].size() : 0);
  const int best = LowestMedian(us);
  medians->assign(algos.size(), 0);
  for (size_t i = 0; i < algos.size(); ++i) {
    if (!us[i].empty()) (*medians)[i] = us[i][us[i].size() / 2];
  }
  if (best < 0) return absl::InternalError("no cuBLASLt algorithm ran on this problem");
  return best;
}

// In one graph regime: each algorithm captured as the candidate would be
// (calls sized by its device time) and replayed kLtGraphTuneRounds times in
// rotated order, each replay on fresh inputs. -1 when none could be captured.
absl::StatusOr<int> ProblemSession::TuneLtGraph(LtGemm& lt,
                                                const std::vector<cublasLtMatmulAlgo_t>& algos,
                                                const std::vector<double>& device_us, bool cold) {
  std::vector<std::optional<Graph>> graphs(algos.size());
  for (size_t i = 0; i < algos.size(); ++i) {
    if (device_us[i] <= 0) continue;
    lt.set_algo(algos[i]);
    std::string why;
    absl::StatusOr<Graph> g = CaptureGraph(lt, cold, GraphCalls(device_us[i], cold), &why);
    if (!g.ok()) return g.status();
    if (g->exec) graphs[i] = std::move(*g);
  }
  std::vector<std::vector<double>> us(algos.size());
  for (int round = 0; round < kLtGraphTuneRounds; ++round) {
    for (size_t j = 0; j < algos.size(); ++j) {
      const size_t i = (j + round) % algos.size();
      if (!graphs[i]) continue;
      double t = 0;
      absl::StatusOr<std::optional<Failure>> f = Replay(lt, *graphs[i], cold, 0, &t);
      if (!f.ok()) return f.status();
      if (*f) return absl::InternalError(absl::StrCat("cuBLASLt graph replay failed: ", (*f)->detail));
      us[i].push_back(t);
    }
  }
  return LowestMedian(us);
}

absl::Status ProblemSession::TuneLt(LtGemm& lt, const LtCached& cached,
                                    std::vector<v1::LtAlgo>* tuned) {
  if (ctx_.plan.screen) return TuneLtScreen(lt, cached, tuned);
  absl::StatusOr<std::vector<cublasLtMatmulAlgo_t>> heur =
      lt.Heuristics(std::max(1, ctx_.protocol.lt_auto_algos()));
  if (!heur.ok()) return heur.status();
  const std::optional<cublasLtMatmulAlgo_t> dev = UsableCached(lt, cached.device);
  const std::optional<cublasLtMatmulAlgo_t> hot = UsableCached(lt, cached.hot);
  const std::optional<cublasLtMatmulAlgo_t> cold = UsableCached(lt, cached.cold);
  std::vector<cublasLtMatmulAlgo_t> algos = *heur;
  for (const auto& c : {dev, hot, cold}) {
    if (c) AddContender(algos, *c);
  }
  const bool graphs = ctx_.protocol.graph_samples() > 0;
  const bool tune_device = !dev || cached.device->retune();
  const bool tune_graphs = graphs && (!hot || !cold || cached.hot->retune() || cached.cold->retune());
  std::vector<double> medians;
  lt_device_algo_ = dev.value_or(algos.front());
  if (tune_device || tune_graphs) {
    absl::StatusOr<int> best = TuneLtDevice(lt, algos, kLtTuneRounds, &medians);
    if (!best.ok()) return best.status();
    if (tune_device) {
      lt_device_algo_ = algos[*best];
      lt_auto_index_ = *best;
      tuned->push_back(TunedChoice(lt_device_algo_, "device"));
    }
  }
  if (graphs) {
    lt_regime_algo_[0] = hot, lt_regime_algo_[1] = cold;
    for (int regime = 0; tune_graphs && regime < 2; ++regime) {
      absl::StatusOr<int> best = TuneLtGraph(lt, algos, medians, regime == 1);
      if (!best.ok()) return best.status();
      if (*best < 0) continue;
      lt_regime_algo_[regime] = algos[*best];
      lt_regime_index_[regime] = *best;
      tuned->push_back(TunedChoice(algos[*best], regime ? "graph-cold" : "graph-hot"));
    }
  }
  lt.set_algo(lt_device_algo_);
  return absl::OkStatus();
}

// A screen compares by one figure (plan.lt_figure: its graph regime, or
// device time for the eager figures, as the full measurement times them
// with the device-time choice). A cached choice for it is used as it is,
// marked retune or not: tuning again is the full measurement's job. Else the
// heuristic's algorithms are timed in that figure (a regime's replays sized
// by one device-time call each) and the winner is the one choice returned.
// The baseline's device samples, which size its replays, use the same choice.
absl::Status ProblemSession::TuneLtScreen(LtGemm& lt, const LtCached& cached,
                                          std::vector<v1::LtAlgo>* tuned) {
  const std::string& figure = ctx_.plan.lt_figure;
  const bool graphs = ctx_.protocol.graph_samples() > 0;
  const int regime = !graphs ? -1 : figure == "graph-hot" ? 0 : figure == "graph-cold" ? 1 : -1;
  const v1::LtAlgo* stored = regime == 0 ? cached.hot : regime == 1 ? cached.cold : cached.device;
  const auto use = [&](const cublasLtMatmulAlgo_t& algo) {
    lt_device_algo_ = algo;
    if (regime >= 0) lt_regime_algo_[regime] = algo;
    lt.set_algo(algo);
  };
  if (std::optional<cublasLtMatmulAlgo_t> c = UsableCached(lt, stored)) {
    use(*c);
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<cublasLtMatmulAlgo_t>> heur =
      lt.Heuristics(std::max(1, ctx_.protocol.lt_auto_algos()));
  if (!heur.ok()) return heur.status();
  const std::vector<cublasLtMatmulAlgo_t>& algos = *heur;
  std::vector<double> medians;
  absl::StatusOr<int> by_device = TuneLtDevice(lt, algos, regime < 0 ? kLtTuneRounds : 1, &medians);
  if (!by_device.ok()) return by_device.status();
  if (regime < 0) {
    use(algos[*by_device]);
    lt_auto_index_ = *by_device;
    tuned->push_back(TunedChoice(algos[*by_device], "device"));
    return absl::OkStatus();
  }
  absl::StatusOr<int> best = TuneLtGraph(lt, algos, medians, regime == 1);
  if (!best.ok()) return best.status();
  if (*best < 0) {  // none captured: the baseline has no graph figure; nothing to cache
    use(algos[*by_device]);
    return absl::OkStatus();
  }
  use(algos[*best]);
  lt_regime_index_[regime] = *best;
  tuned->push_back(TunedChoice(algos[*best], figure));
  return absl::OkStatus();
}

}  // namespace anvil::runner
