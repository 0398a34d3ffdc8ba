// anvil-model-bench: how well the search's cost model ranks what was then
// measured. Reads a store, and for every problem of one GPU with verified
// winners takes the seed configurations measured there (PASSED; one entry per
// configuration across seed-source versions, its fastest device time), then
// prints per problem:
//   rho_model   Spearman rank correlation of Predict() (first principles)
//               with the measured times;
//   rho_refined the same for CostModel::Refined() fed every other problem's
//               observations (leave-one-problem-out: what the search knows
//               about a problem it has not measured yet: the screen);
//   rho_loo     Refined() fed everything but the configuration itself (what
//               it knows when it ranks a leader's neighbours: evolve);
//   best@model  where the measured-fastest configuration sits in the
//   best@refined  first two models' order (1 = first);
//   rho_learned the same for the learned model (learned/learned_model.h)
//               trained on every other problem's configurations (leave one
//               problem out, as rho_refined), each row with its refined
//               estimate from the problems but its own (--no-stack: without);
//   best@model  where the measured-fastest configuration sits in the
//   best@refined  first two models' and the learned model's order
//   best@learned  (1 = first);
//   gap6@model  how much slower the fastest of each model's first 6 is than
//   gap6@refined  the measured-fastest (0.05 = 5%; the screen takes 6);
//   gap6@learned
//   top6@refined  how many of the measured 6 fastest are among the model's
//   top6@learned  first 6 (recall, 1 = all);
// and the medians over problems. --no-learned leaves the learned model out.
// --show MxNxK lists that problem's configurations in the first-principles
// order with their measured times.
//   anvil-model-bench --db search.db [--gpu H200] [--seeds DIR] [--k 4] [--show MxNxK]
//                     [--no-learned] [--no-stack] [--rounds 300] [--focus 4]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <map>
#include <optional>

#include <CLI/CLI.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "proto/problem.h"
#include "seeds/space.h"
#include "server/proposers/embedded/cost_model.h"
#include "server/proposers/embedded/learned/learned_model.h"
#include "store/store.h"
#include "worker/toolchain.h"

namespace anvil {
namespace {

struct Point {
  const SeedFamily* family = nullptr;
  KnobParams params;
  double measured_us = 0;
};

struct ProblemPoints {
  v1::Problem problem;
  std::vector<Point> points;
};

// Ranks (1-based; ties share their mean rank).
std::vector<double> Ranks(const std::vector<double>& v) {
  std::vector<size_t> order(v.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> r(v.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
    for (size_t k = i; k <= j; ++k) r[order[k]] = (i + j) / 2.0 + 1;
    i = j + 1;
  }
  return r;
}

double Spearman(const std::vector<double>& a, const std::vector<double>& b) {
  const std::vector<double> ra = Ranks(a), rb = Ranks(b);
  const double n = static_cast<double>(a.size());
  double ma = 0, mb = 0;
  for (size_t i = 0; i < a.size(); ++i) ma += ra[i] / n, mb += rb[i] / n;
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    sab += (ra[i] - ma) * (rb[i] - mb);
    saa += (ra[i] - ma) * (ra[i] - ma);
    sbb += (rb[i] - mb) * (rb[i] - mb);
  }
  return saa > 0 && sbb > 0 ? sab / std::sqrt(saa * sbb) : 0;
}

// 1-based position of the measured-fastest point in the order of `predicted`.
int RankOfBest(const std::vector<double>& predicted, const std::vector<double>& measured) {
  const size_t best = std::min_element(measured.begin(), measured.end()) - measured.begin();
  int rank = 1;
  for (double p : predicted) rank += p < predicted[best];
  return rank;
}

// Measured time of the fastest of the first `n` in the order of `predicted`,
// over the fastest measured, minus 1.
double Gap(const std::vector<double>& predicted, const std::vector<double>& measured, size_t n) {
  std::vector<size_t> order(predicted.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return predicted[a] < predicted[b]; });
  double best_of_first = measured[order[0]];
  for (size_t i = 1; i < std::min(n, order.size()); ++i) best_of_first = std::min(best_of_first, measured[order[i]]);
  return best_of_first / *std::min_element(measured.begin(), measured.end()) - 1;
}

// How many of the `n` measured-fastest are among the first `n` of `predicted`, over n.
double TopRecall(const std::vector<double>& predicted, const std::vector<double>& measured, size_t n) {
  const auto first = [&](const std::vector<double>& v) {
    std::vector<size_t> order(v.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
    order.resize(std::min(n, order.size()));
    std::sort(order.begin(), order.end());
    return order;
  };
  const std::vector<size_t> a = first(predicted), b = first(measured);
  std::vector<size_t> both;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(both));
  return b.empty() ? 0 : double(both.size()) / double(b.size());
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

absl::StatusOr<std::vector<ProblemPoints>> Load(Store& store, const std::string& gpu,
                                                const std::vector<SeedFamily>& seeds) {
  absl::StatusOr<std::vector<v1::Kernel>> best = store.ListBestKernels(gpu, v1::LAYOUT_UNSPECIFIED, "device", 1000);
  if (!best.ok()) return best.status();
  std::map<std::string, std::optional<v1::Candidate>> candidates;
  std::vector<ProblemPoints> out;
  for (const v1::Kernel& k : *best) {
    ProblemPoints pp;
    pp.problem = k.measurement().problem();
    absl::StatusOr<std::vector<StoredMeasurement>> h = store.SearchHistory(pp.problem);
    if (!h.ok()) return h.status();
    std::map<std::string, size_t> index;  // family/knobs -> point
    for (const StoredMeasurement& m : *h) {
      if (m.measurement.verdict() != v1::VERDICT_PASSED) continue;
      auto [it, fresh] = candidates.try_emplace(m.measurement.candidate_id());
      if (fresh) {
        absl::StatusOr<v1::Candidate> c = store.GetCandidate(m.measurement.candidate_id());
        if (c.ok()) it->second = *c;
      }
      if (!it->second) continue;
      const v1::Candidate& c = *it->second;
      const SeedFamily* f = nullptr;
      for (const SeedFamily& s : seeds) f = s.name == c.family() ? &s : f;
      if (f == nullptr || f->model.empty()) continue;
      KnobParams params(c.params().begin(), c.params().end());
      if (!CheckConfig(*f, c.layout(), params).ok()) continue;  // knobs changed since
      const double us = m.measurement.timings().device().median_us();
      auto [at, added] = index.try_emplace(ConfigKey(*f, c.layout(), params), pp.points.size());
      if (added) pp.points.push_back({f, WithDefaults(*f, params), us});
      else pp.points[at->second].measured_us = std::min(pp.points[at->second].measured_us, us);
    }
    if (pp.points.size() >= 3) out.push_back(std::move(pp));
  }
  return out;
}

// Observations of from's configurations (but skip) into model.
void Observe(CostModel& model, const ProblemPoints& from, const Point* skip, const DeviceModel& device) {
  for (const Point& q : from.points) {
    if (&q == skip) continue;
    absl::StatusOr<Estimate> e = Predict(*q.family, from.problem.layout(), q.params,
                                         from.problem.shape(), device);
    if (e.ok()) model.Observe({q.family->name, q.params, from.problem.shape(), e->us, q.measured_us});
  }
}

// A problem's configurations, measured and estimated three ways: the model
// alone, refined by the observations of every other problem (of its GPU), and
// by those and this problem's but the configuration's own (leave one out).
struct Ranked {
  std::vector<double> measured, model, refined, loo, learned;
};

// The learned model trained on every other problem of pp's GPU (leave one
// problem out); nothing when it cannot be trained. With `stack`, each
// training row's features carry its refined estimate from the problems but
// its own and pp (as pp's rows carry theirs from every problem but pp).
std::optional<LearnedModel> Learn(const std::vector<ProblemPoints>& problems, const ProblemPoints& pp,
                                  const FeatureMap& map, const DeviceModel& device,
                                  const LearnedOptions& options, double focus, bool stack, int k) {
  std::vector<std::vector<float>> x;
  std::vector<float> y, w;
  for (const ProblemPoints& other : problems) {
    if (&other == &pp || other.problem.gpu() != pp.problem.gpu()) continue;
    CostModel without(device);  // observes nothing without `stack`
    for (const ProblemPoints& q : problems) {
      if (stack && &q != &pp && &q != &other && q.problem.gpu() == pp.problem.gpu()) {
        Observe(without, q, nullptr, device);
      }
    }
    double best = 0;
    for (const Point& q : other.points) best = best > 0 ? std::min(best, q.measured_us) : q.measured_us;
    for (const Point& q : other.points) {
      double est = 0, refined = 0;
      if (stack) {
        absl::StatusOr<Estimate> r = without.Refined(*q.family, other.problem.layout(), q.params,
                                                     other.problem.shape(), k);
        refined = r.ok() ? r->us : 0;
      }
      absl::StatusOr<std::vector<float>> f = map.Of(*q.family, other.problem.layout(), q.params,
                                                    other.problem.shape(), device, &est, refined);
      if (!f.ok() || est <= 0 || q.measured_us <= 0) continue;
      x.push_back(*std::move(f));
      y.push_back(static_cast<float>(std::log(q.measured_us / est)));
      w.push_back(focus > 0 ? TrainingWeight(q.measured_us, best, focus) : 1.f);
    }
  }
  absl::StatusOr<LearnedModel> m = LearnedModel::Train(x, y, options, w);
  if (!m.ok()) return std::nullopt;
  return *std::move(m);
}

// The learned model's estimate of q on pp (0: none); `refined_us` as Learn's rows.
double LearnedUs(const LearnedModel* m, const FeatureMap& map, const ProblemPoints& pp, const Point& q,
                 const DeviceModel& device, double refined_us) {
  double est = 0;
  absl::StatusOr<std::vector<float>> f = m ? map.Of(*q.family, pp.problem.layout(), q.params,
                                                    pp.problem.shape(), device, &est, refined_us)
                                           : absl::UnavailableError("no model");
  if (!f.ok()) return 0;
  absl::StatusOr<std::vector<float>> got = m->Predict({*f});
  return got.ok() && got->size() == 1 ? est * std::exp(got->front()) : 0;
}

// Ranks pp's configurations; prints them in model order when pp's shape is show.
Ranked Rank(const std::vector<ProblemPoints>& problems, const ProblemPoints& pp,
            const DeviceModel& device, int k, const std::string& show, const LearnedModel* learned,
            const FeatureMap& map, bool stack) {
  CostModel others(device);
  for (const ProblemPoints& other : problems) {
    if (&other != &pp && other.problem.gpu() == pp.problem.gpu()) Observe(others, other, nullptr, device);
  }
  Ranked out;
  std::vector<std::pair<double, std::string>> listing;
  for (const Point& q : pp.points) {
    CostModel loo = others;
    Observe(loo, pp, &q, device);
    absl::StatusOr<Estimate> e = Predict(*q.family, pp.problem.layout(), q.params, pp.problem.shape(), device);
    absl::StatusOr<Estimate> r = others.Refined(*q.family, pp.problem.layout(), q.params, pp.problem.shape(), k);
    absl::StatusOr<Estimate> l = loo.Refined(*q.family, pp.problem.layout(), q.params, pp.problem.shape(), k);
    const double learned_us = LearnedUs(learned, map, pp, q, device, stack && r.ok() ? r->us : 0);
    if (!e.ok() || !r.ok() || !l.ok() || (learned && learned_us <= 0)) continue;
    out.measured.push_back(q.measured_us);
    if (learned) out.learned.push_back(learned_us);
    out.model.push_back(e->us);
    if (ShapeName(pp.problem.shape()) == show) {
      std::string knobs;
      for (const auto& [name, value] : q.params) absl::StrAppend(&knobs, " ", name, "=", value);
      listing.emplace_back(e->us, absl::StrCat(absl::StrFormat("model %9.2f us  measured %9.2f us  %s  ",
                                                               e->us, q.measured_us, e->bound),
                                               q.family->name, knobs));
    }
    out.refined.push_back(r->us);
    out.loo.push_back(l->us);
  }
  std::sort(listing.begin(), listing.end());
  for (const auto& [us, line] : listing) std::printf("  %s\n", line.c_str());
  return out;
}

// Each problem's figures, column by column (the learned model's: x; -1 without it).
struct Columns {
  std::vector<double> rho_m, rho_r, rho_l, rho_x, at_m, at_r, at_x, gap_m, gap_r, gap_x, top_r, top_x;
  // Appends r's figures here and returns them alone.
  Columns Add(const Ranked& r) {
    Columns one;
    const bool x = r.learned.size() == r.measured.size();
    one.rho_m = {Spearman(r.model, r.measured)};
    one.rho_r = {Spearman(r.refined, r.measured)};
    one.rho_l = {Spearman(r.loo, r.measured)};
    one.rho_x = {x ? Spearman(r.learned, r.measured) : -1};
    one.at_m = {double(RankOfBest(r.model, r.measured))};
    one.at_r = {double(RankOfBest(r.refined, r.measured))};
    one.at_x = {x ? double(RankOfBest(r.learned, r.measured)) : -1};
    one.gap_m = {Gap(r.model, r.measured, 6)};
    one.gap_r = {Gap(r.refined, r.measured, 6)};
    one.gap_x = {x ? Gap(r.learned, r.measured, 6) : -1};
    one.top_r = {TopRecall(r.refined, r.measured, 6)};
    one.top_x = {x ? TopRecall(r.learned, r.measured, 6) : -1};
    for (auto [to, from] : {std::pair{&rho_m, &one.rho_m}, {&rho_r, &one.rho_r}, {&rho_l, &one.rho_l},
                            {&rho_x, &one.rho_x}, {&at_m, &one.at_m}, {&at_r, &one.at_r}, {&at_x, &one.at_x},
                            {&gap_m, &one.gap_m}, {&gap_r, &one.gap_r}, {&gap_x, &one.gap_x},
                            {&top_r, &one.top_r}, {&top_x, &one.top_x}}) {
      to->push_back(from->front());
    }
    return one;
  }
};

}  // namespace
}  // namespace anvil

int main(int argc, char** argv) {
  using namespace anvil;
  CLI::App app{"anvil-model-bench: the cost model's ranking against a store's measurements"};
  std::string db, gpu, seeds_dir;
  int k = 4;
  std::string show;
  app.add_option("--db", db, "the store")->required();
  app.add_option("--gpu", gpu, "only this device model (default: all)");
  app.add_option("--seeds", seeds_dir, "seed families (default: the installed ones)");
  app.add_option("--k", k, "nearest observations Refined() uses")->check(CLI::Range(1, 64));
  app.add_option("--show", show, "list one problem's configurations, model order (MxNxK)");
  bool no_learned = false;
  int rounds = LearnedOptions().rounds;
  app.add_flag("--no-learned", no_learned, "leave the learned model out");
  bool no_stack = false;
  app.add_flag("--no-stack", no_stack, "the learned model without the refined estimate as a feature");
  app.add_option("--rounds", rounds, "the learned model's boosting rounds")->check(CLI::Range(1, 5000));
  double focus = 4;
  app.add_option("--focus", focus, "training weight (best / time)^focus; 0: every row alike")
      ->check(CLI::Range(0.0, 16.0));
  CLI11_PARSE(app, argc, argv);

  StoreOptions so;
  so.read_only = true;
  so.create_if_missing = false;
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(db, so);
  if (!store.ok()) {
    std::cerr << "anvil-model-bench: " << store.status() << "\n";
    return 4;
  }
  absl::StatusOr<std::vector<SeedFamily>> seeds =
      LoadSeeds(seeds_dir.empty() ? DefaultSeedsDir(Toolchain::ExecutableDir()) : seeds_dir);
  if (!seeds.ok()) {
    std::cerr << "anvil-model-bench: " << seeds.status() << "\n";
    return 1;
  }
  absl::StatusOr<std::vector<ProblemPoints>> problems = Load(**store, gpu, *seeds);
  if (!problems.ok()) {
    std::cerr << "anvil-model-bench: " << problems.status() << "\n";
    return 4;
  }
  const DeviceModel device;
  const FeatureMap map(*seeds);
  LearnedOptions lo;
  lo.rounds = rounds;
  std::printf("%-10s %-22s %-3s %7s %9s %11s %7s %11s %10s %12s %12s %10s %12s %12s %12s %12s\n",
              "gpu", "shape", "lay", "configs", "rho_model", "rho_refined", "rho_loo", "rho_learned",
              "best@model", "best@refined", "best@learned", "gap6@model", "gap6@refined",
              "gap6@learned", "top6@refined", "top6@learned");
  Columns all;
  for (const ProblemPoints& pp : *problems) {
    std::optional<LearnedModel> learned;
    if (!no_learned) learned = Learn(*problems, pp, map, device, lo, focus, !no_stack, k);
    const Ranked r = Rank(*problems, pp, device, k, show, learned ? &*learned : nullptr, map, !no_stack);
    if (r.measured.size() < 3) continue;
    const Columns row = all.Add(r);
    std::printf("%-10s %-22s %-3s %7zu %9.2f %11.2f %7.2f %11.2f %10.0f %12.0f %12.0f %10.3f %12.3f "
                "%12.3f %12.2f %12.2f\n",
                pp.problem.gpu().c_str(), ShapeName(pp.problem.shape()).c_str(),
                std::string(LayoutName(pp.problem.layout())).c_str(), r.measured.size(), row.rho_m[0],
                row.rho_r[0], row.rho_l[0], row.rho_x[0], row.at_m[0], row.at_r[0], row.at_x[0],
                row.gap_m[0], row.gap_r[0], row.gap_x[0], row.top_r[0], row.top_x[0]);
  }
  std::printf("median over %zu problems: rho_model %.2f, rho_refined %.2f, rho_loo %.2f, rho_learned %.2f, "
              "best@model %.0f, best@refined %.0f, best@learned %.0f, gap6@model %.3f, gap6@refined %.3f, "
              "gap6@learned %.3f, top6@refined %.2f, top6@learned %.2f\n",
              all.rho_m.size(), Median(all.rho_m), Median(all.rho_r), Median(all.rho_l), Median(all.rho_x),
              Median(all.at_m), Median(all.at_r), Median(all.at_x), Median(all.gap_m), Median(all.gap_r),
              Median(all.gap_x), Median(all.top_r), Median(all.top_x));
  return 0;
}
