// Profile hints: the runner's counter profile of a kernel (Measurement
// profile keys "hw.<metric>", and "hw.baseline.<metric>" for the fastest
// baseline; worker/runner/counter_profile.cc names them) read as the
// bottleneck of that kernel, in a few lines for the LLM's prompt. Pure;
// thread-safe.
//
// The bottleneck is the first of these rules that holds (ClassifyBottleneck):
//   1. "compute"    the tensor pipe is busy >= 60% of the SMs' active cycles:
//                   the kernel is at the tensor roof, only better MMA issue helps;
//   2. "memory"     DRAM moves >= 60% of the attainable bandwidth over the
//                   kernel's span: at the HBM roof, even when some SMs idle
//                   (more CTAs would not make the bytes come faster);
//   3. "imbalance"  the average SM is active < 80% of the busiest one's cycles:
//                   neither roof is reached and SMs sit idle (too few CTAs or
//                   a partial last wave: smaller tiles, split-K, stream-K);
//   4. "memory"     the problem is below Hopper's ridge, or DRAM traffic is over
//                   1.5x the compulsory bytes: on the memory side of the
//                   roofline, with HBM headroom (more bytes in flight, less
//                   re-reading);
//   5. "latency"    none of these: issue, dependency or synchronisation stalls.
// Without counters the bottleneck is "unknown".
#ifndef ANVIL_REWARD_PROFILE_HINT_H_
#define ANVIL_REWARD_PROFILE_HINT_H_

#include <string>

#include "anvil/v1/types.pb.h"

namespace anvil {

// Hopper's ridge point: dense fp16 tensor FLOP/s over HBM3 bytes/s (H100 SXM:
// 989 TFLOP/s / 3.35 TB/s). A problem below it is memory-bound by the roofline.
inline constexpr double kHopperRidgeFlopPerByte = 295;
// H100 SXM's HBM3 bandwidth, the attainable DRAM rate when the measurement
// does not give the device's own (see ProfileFacts::dram_fraction).
inline constexpr double kHopperDramBytesPerS = 3.35e12;

// Thresholds of the rules above.
inline constexpr double kComputeTensorPct = 60;
inline constexpr double kMemoryDramFraction = 0.6;
inline constexpr double kImbalanceSmBalance = 0.8;
inline constexpr double kExcessDramTraffic = 1.5;

// What the rules read, from one measurement's counters; -1 when not measured.
struct ProfileFacts {
  double intensity = 0;             // FLOP per compulsory byte (A+B+C)
  double tensor_pct = -1;           // tensor pipe busy, % of active cycles
  double sm_balance = -1;           // average SM's active cycles / the busiest SM's
  double kernel_us = -1;            // the kernel's span: busiest SM's share of the range
  double dram_bytes = -1;           // DRAM bytes read plus written in the range
  double dram_over_compulsory = -1; // dram_bytes / (A+B+C bytes)
  // DRAM bytes per second over kernel_us, as a fraction of the attainable
  // rate: the device's copy ceiling where its speed-of-light is memory-bound
  // (compulsory bytes / sol_us), else kHopperDramBytesPerS.
  double dram_fraction = -1;
};

struct ProfileHint {
  // "memory", "compute", "latency", "imbalance", or "unknown" (no counters).
  std::string bottleneck = "unknown";
  std::string why;   // the rule that chose it, with the figures it read
  std::string text;  // a few lines for a person or a model
  ProfileFacts facts;
};

ProfileFacts ReadProfileFacts(const v1::Measurement& m);

// The rules above; sets hint->bottleneck and hint->why.
void ClassifyBottleneck(const ProfileFacts& f, ProfileHint* hint);

ProfileHint SummariseProfile(const v1::Measurement& m);

}  // namespace anvil

#endif  // ANVIL_REWARD_PROFILE_HINT_H_
