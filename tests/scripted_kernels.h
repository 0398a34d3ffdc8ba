// ScriptedKernels: the script of the scripted LLM endpoint in the LLM
// proposer's GPU test (a test double, not product code): real kernel variants
// built from the seeds, each meant to end in one known way through the real
// builder and runner, and the seed configurations whose counter profiles show
// different bottlenecks. scripted_kernels_test.cc checks on the CPU that each
// variant passes the source policy and ABI checks and builds (or not) with nvcc.
// Thread-safe (pure functions of the seed files).
#ifndef ANVIL_TESTS_SCRIPTED_KERNELS_H_
#define ANVIL_TESTS_SCRIPTED_KERNELS_H_

#include <string>
#include <vector>

#include "tests/scripted_llm_server.h"

namespace anvil::testing {

// <family>/kernel.cu of the seeds directory ($ANVIL_SEEDS_DIR, the bundle's or
// the source tree's: DefaultSeedsDir); "" when unreadable.
std::string SeedSource(const std::string& family);

// `source` with "#define ANVIL_<knob> <from>" set to <to>; unchanged when absent.
std::string WithKnob(const std::string& source, const std::string& knob, int from, int to);

// 02_mma_sync storing every pair of C's columns swapped (v1 at col, v0 at
// col+1): compiles, passes the ABI and policy, computes a wrong C, so the
// runner's verdict is INCORRECT (wrong_result). Unchanged when the seed no
// longer has that store.
std::string SwappedColumnPairs(const std::string& mma_source);

// 02_mma_sync whose anvil_gemm returns 0 before launching anything: a CHEAT
// (no_gpu_work).
std::string NoGpuWork(const std::string& mma_source);

// 03_wgmma_tma as the search's fastest configuration for 16x4096x4096 nt on an
// H100 (swap-AB 64x16 tiles, one consumer, 16 stages, persistent, shape
// fixed): it streams B at cuBLAS's speed, so its profile is DRAM-bound. The
// seed's default 128x256 tiles (32 CTAs there) leave most SMs idle.
std::string WgmmaSkinnyStream(const std::string& wgmma_source);

// What each choice of a first-turn answer is meant to end as.
struct ScriptedChoice {
  std::string text;     // the assistant message
  std::string outcome;  // "speedup", "compile_error", "incorrect", "cheat", "no_code"
};
// The choices of the index-th first-turn answer: a real variant (a knob of
// 02_mma_sync changed, or 03_wgmma_tma), one that does not compile, one with
// swapped column pairs, one that launches nothing, and a refusal.
std::vector<ScriptedChoice> FirstTurnChoices(int index);

// The endpoint's handler: first turns get FirstTurnChoices (as many as the
// request's n), repair turns (more than system + user messages) the plain
// 02_mma_sync seed.
ScriptedReply KernelAnswer(const ScriptedRequest& q, int index);

}  // namespace anvil::testing

#endif  // ANVIL_TESTS_SCRIPTED_KERNELS_H_
