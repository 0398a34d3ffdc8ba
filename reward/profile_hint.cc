#include "reward/profile_hint.h"

#include <algorithm>
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

// A, B and C once each, in bytes.
double CompulsoryBytes(const v1::Shape& s) {
  return 2.0 * (s.m() * double(s.k()) + s.n() * double(s.k()) + s.m() * double(s.n()));
}

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

// The counter lines of the hint (after the roofline and speed-of-light).
void CounterLines(const v1::Measurement& m, const ProfileFacts& f, std::vector<std::string>& lines) {
  lines.push_back(absl::StrFormat("tensor pipe busy %.0f%% of active cycles%s", f.tensor_pct,
                                  Versus(m, kTensor, "%")));
  if (f.dram_over_compulsory >= 0) {
    std::string rate = f.dram_fraction < 0 ? "" : absl::StrFormat(
        ", %.0f%% of the attainable DRAM bandwidth over the kernel's %.1f us",
        100 * f.dram_fraction, f.kernel_us);
    lines.push_back(absl::StrFormat("DRAM traffic %.2fx the compulsory bytes (A+B+C)%s; L2 hit rate %.0f%%%s",
                                    f.dram_over_compulsory, rate, Hw(m, kHit), Versus(m, kHit, "%")));
  }
  if (double w = Hw(m, kWarps); w >= 0) {
    lines.push_back(absl::StrFormat("occupancy %.0f%% of peak warps%s", w, Versus(m, kWarps, "%")));
  }
  if (f.sm_balance >= 0 && f.sm_balance < kImbalanceSmBalance) {
    lines.push_back(absl::StrFormat(
        "SMs unevenly loaded: the average SM is active %.0f%% of the busiest one's cycles "
        "(too few CTAs or a partial last wave: smaller tiles, split-K or stream-K)",
        100 * f.sm_balance));
  }
  const std::string stall = MainStall(m);
  if (!stall.empty()) lines.push_back(stall);
}

}  // namespace

ProfileFacts ReadProfileFacts(const v1::Measurement& m) {
  ProfileFacts f;
  const v1::Shape& s = m.problem().shape();
  const double bytes = CompulsoryBytes(s);
  f.intensity = bytes > 0 ? 2.0 * s.m() * double(s.n()) * s.k() / bytes : 0;
  f.tensor_pct = Hw(m, kTensor);
  const double avg = Hw(m, "sm__cycles_active.avg"), busiest = Hw(m, "sm__cycles_active.max");
  if (avg >= 0 && busiest > 0) f.sm_balance = avg / busiest;
  const double read = Hw(m, "dram__bytes_read.sum"), write = Hw(m, "dram__bytes_write.sum");
  if (read >= 0 && write >= 0) {
    f.dram_bytes = read + write;
    if (bytes > 0) f.dram_over_compulsory = f.dram_bytes / bytes;
  }
  // The profiled range holds more than the kernels (counter_profile.cc): the
  // busiest SM's active cycles over the range's elapsed cycles is the
  // kernels' share of the range's duration.
  const double range_ns = Hw(m, "gpu__time_duration.sum"), elapsed = Hw(m, "gpc__cycles_elapsed.max");
  if (range_ns > 0 && elapsed > 0 && busiest > 0) {
    f.kernel_us = 1e-3 * range_ns * std::min(1.0, busiest / elapsed);
  }
  if (f.kernel_us > 0 && f.dram_bytes >= 0) {
    const bool sol_is_copy = f.intensity < kHopperRidgeFlopPerByte && m.sol_us() > 0;
    const double attainable = sol_is_copy ? bytes / (1e-6 * m.sol_us()) : kHopperDramBytesPerS;
    f.dram_fraction = f.dram_bytes / (1e-6 * f.kernel_us) / attainable;
  }
  return f;
}

void ClassifyBottleneck(const ProfileFacts& f, ProfileHint* hint) {
  auto pick = [&](const char* b, std::string why) {
    hint->bottleneck = b;
    hint->why = std::move(why);
  };
  if (f.tensor_pct < 0) return pick("unknown", "no hardware counters were recorded");
  if (f.tensor_pct >= kComputeTensorPct) {
    return pick("compute", absl::StrFormat("tensor pipe busy %.0f%% >= %.0f%%", f.tensor_pct, kComputeTensorPct));
  }
  if (f.dram_fraction >= kMemoryDramFraction) {
    return pick("memory", absl::StrFormat("DRAM at %.0f%% >= %.0f%% of the attainable bandwidth",
                                          100 * f.dram_fraction, 100 * kMemoryDramFraction));
  }
  const std::string neither = absl::StrFormat(
      "tensor pipe %.0f%% < %.0f%%, DRAM %s", f.tensor_pct, kComputeTensorPct,
      f.dram_fraction < 0 ? std::string("rate unknown")
                          : absl::StrFormat("at %.0f%% < %.0f%%", 100 * f.dram_fraction, 100 * kMemoryDramFraction));
  if (f.sm_balance >= 0 && f.sm_balance < kImbalanceSmBalance) {
    return pick("imbalance", absl::StrFormat("%s, average SM active %.0f%% < %.0f%% of the busiest", neither,
                                             100 * f.sm_balance, 100 * kImbalanceSmBalance));
  }
  if (f.intensity < kHopperRidgeFlopPerByte || f.dram_over_compulsory > kExcessDramTraffic) {
    return pick("memory", absl::StrFormat("%s, SMs evenly loaded, %s", neither,
                                          f.intensity < kHopperRidgeFlopPerByte
                                              ? "below the ridge"
                                              : "DRAM traffic over 1.5x the compulsory bytes"));
  }
  pick("latency", absl::StrFormat("%s, SMs evenly loaded, above the ridge", neither));
}

ProfileHint SummariseProfile(const v1::Measurement& m) {
  ProfileHint hint;
  hint.facts = ReadProfileFacts(m);
  const ProfileFacts& f = hint.facts;
  std::vector<std::string> lines;
  const bool below = f.intensity < kHopperRidgeFlopPerByte;
  lines.push_back(absl::StrFormat("roofline: %.0f FLOP/byte, %s Hopper's ridge (~%.0f): %s by the roofline",
                                  f.intensity, below ? "below" : "above", kHopperRidgeFlopPerByte,
                                  below ? "memory-bound" : "compute-bound"));
  if (m.efficiency() > 0) {
    lines.push_back(absl::StrFormat("at %.0f%% of speed-of-light (%.2f us)", 100 * m.efficiency(), m.sol_us()));
  }
  ClassifyBottleneck(f, &hint);
  if (f.tensor_pct < 0) {
    hint.text = absl::StrJoin(lines, "\n") + "\n(no hardware counters were recorded)";
    return hint;
  }
  CounterLines(m, f, lines);
  hint.text = absl::StrCat("bottleneck: ", hint.bottleneck, " (", hint.why, ")\n", absl::StrJoin(lines, "\n"));
  return hint;
}

}  // namespace anvil
