// Profile hints: the runner's counter profile of a kernel (Measurement
// profile keys "hw.<metric>", and "hw.baseline.<metric>" for the fastest
// baseline; worker/runner/counter_profile.cc names them) read as the
// bottleneck of that kernel, in a few lines for the LLM's prompt. Pure;
// thread-safe.
#ifndef ANVIL_REWARD_PROFILE_HINT_H_
#define ANVIL_REWARD_PROFILE_HINT_H_

#include <string>

#include "anvil/v1/types.pb.h"

namespace anvil {

struct ProfileHint {
  // "memory", "compute", "latency", "imbalance", or "unknown" (no counters).
  std::string bottleneck = "unknown";
  std::string text;  // a few lines for a person or a model
};

// Hopper's ridge point: dense fp16 tensor FLOP/s over HBM3 bytes/s (H100 SXM:
// 989 TFLOP/s / 3.35 TB/s). A problem below it is memory-bound by the roofline.
inline constexpr double kHopperRidgeFlopPerByte = 295;

ProfileHint SummariseProfile(const v1::Measurement& m);

}  // namespace anvil

#endif  // ANVIL_REWARD_PROFILE_HINT_H_
