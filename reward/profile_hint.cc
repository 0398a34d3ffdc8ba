#include "reward/profile_hint.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace anvil {
namespace {

// The value of "hw.<metric>" (or "hw.baseline.<metric>"), -1 when absent.
double Hw(const v1::Measurement& m, const std::string& metric, bool baseline = false) {
  auto it = m.profile().find(absl::StrCat(baseline ? "hw.baseline." : "hw.", metric));
  return it == m.profile().end() ? -1 : it->second;
}

std::string Versus(const v1::Measurement& m, const std::string& metric, const char* unit) {
  double b = Hw(m, metric, true);
  return b < 0 ? "" : absl::StrFormat(" (fastest baseline %.0f%s)", b, unit);
}

constexpr char kTensor[] = "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active";
constexpr char kWarps[] = "sm__warps_active.avg.pct_of_peak_sustained_active";
constexpr char kLongSb[] = "smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct";
constexpr char kBarrier[] = "smsp__warp_issue_stalled_barrier_per_warp_active.pct";
constexpr char kGmma[] = "smsp__warp_issue_stalled_gmma_per_warp_active.pct";
constexpr char kHit[] = "lts__t_sector_hit_rate.pct";

// The largest stall reason, as a phrase; empty when none is reported.
std::string MainStall(const v1::Measurement& m) {
  const std::pair<const char*, const char*> stalls[] = {
      {kLongSb, "global-memory loads (long scoreboard): deeper pipelining or TMA prefetch"},
      {kBarrier, "block barriers: fewer __syncthreads, mbarrier-based producer/consumer"},
      {kGmma, "wgmma results: more warpgroups in flight (ping-pong) or longer K per stage"}};
  double worst = 0;
  std::string phrase;
  for (const auto& [metric, text] : stalls) {
    double v = Hw(m, metric);
    if (v > worst) {
      worst = v;
      phrase = absl::StrFormat("warps mostly stalled on %s (%.0f%% of active warps)", text, v);
    }
  }
  return worst >= 10 ? phrase : "";
}

}  // namespace

ProfileHint SummariseProfile(const v1::Measurement& m) {
  ProfileHint hint;
  const auto& s = m.problem().shape();
  const double flops = 2.0 * s.m() * double(s.n()) * s.k();
  const double bytes = 2.0 * (s.m() * double(s.k()) + s.n() * double(s.k()) + s.m() * double(s.n()));
  const double intensity = bytes > 0 ? flops / bytes : 0;
  std::vector<std::string> lines;
  lines.push_back(absl::StrFormat(
      "roofline: %.0f FLOP/byte, %s Hopper's ridge (~%.0f): %s by the roofline", intensity,
      intensity < kHopperRidgeFlopPerByte ? "below" : "above", kHopperRidgeFlopPerByte,
      intensity < kHopperRidgeFlopPerByte ? "memory-bound" : "compute-bound"));
  if (m.efficiency() > 0) {
    lines.push_back(absl::StrFormat("at %.0f%% of speed-of-light (%.2f us)", 100 * m.efficiency(),
                                    m.sol_us()));
  }
  const double tensor = Hw(m, kTensor);
  if (tensor < 0) {
    hint.text = absl::StrJoin(lines, "\n") + "\n(no hardware counters were recorded)";
    return hint;
  }
  const double dram = Hw(m, "dram__bytes_read.sum") + Hw(m, "dram__bytes_write.sum") + 2;
  const double active_avg = Hw(m, "sm__cycles_active.avg"), active_max = Hw(m, "sm__cycles_active.max");
  const double balance = active_max > 0 ? active_avg / active_max : 1;
  lines.push_back(absl::StrFormat("tensor pipe busy %.0f%% of active cycles%s", tensor,
                                  Versus(m, kTensor, "%")));
  if (dram > 2 && bytes > 0) {
    lines.push_back(absl::StrFormat("DRAM traffic %.2fx the compulsory bytes (A+B+C); L2 hit rate %.0f%%%s",
                                    dram / bytes, Hw(m, kHit), Versus(m, kHit, "%")));
  }
  if (double w = Hw(m, kWarps); w >= 0) {
    lines.push_back(absl::StrFormat("occupancy %.0f%% of peak warps%s", w, Versus(m, kWarps, "%")));
  }
  if (balance < 0.8) {
    lines.push_back(absl::StrFormat(
        "SMs unevenly loaded: the average SM is active %.0f%% of the busiest one's cycles "
        "(too few CTAs or a partial last wave: smaller tiles, split-K or stream-K)",
        100 * balance));
  }
  const std::string stall = MainStall(m);
  if (!stall.empty()) lines.push_back(stall);
  if (tensor >= 60) {
    hint.bottleneck = "compute";
  } else if (balance < 0.8) {
    hint.bottleneck = "imbalance";
  } else if (intensity < kHopperRidgeFlopPerByte || dram > 1.5 * bytes) {
    hint.bottleneck = "memory";
  } else {
    hint.bottleneck = "latency";
  }
  hint.text = absl::StrCat("bottleneck: ", hint.bottleneck, "\n", absl::StrJoin(lines, "\n"));
  return hint;
}

}  // namespace anvil
