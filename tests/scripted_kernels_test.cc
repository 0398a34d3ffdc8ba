// The scripted endpoint's kernels on the CPU: every variant passes the
// source policy and ABI checks the LLM proposer applies before nvcc, each
// mutation really changed the seed, and with nvcc present the broken ones
// build (or fail to build) as the GPU test expects.
#include "tests/scripted_kernels.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <optional>

#include "absl/strings/str_cat.h"
#include "proto/candidate.h"
#include "sandbox/sandbox.h"
#include "server/proposers/llm/extract.h"
#include "worker/builder.h"

namespace anvil::testing {
namespace {

TEST(ScriptedKernels, EveryVariantPassesThePolicyAndAbiChecks) {
  ASSERT_FALSE(SeedSource("02_mma_sync").empty());
  ASSERT_FALSE(SeedSource("03_wgmma_tma").empty());
  for (int index = 0; index < 4; ++index) {
    Extractor extractor{sandbox::SourcePolicy{}};
    for (const ScriptedChoice& c : FirstTurnChoices(index)) {
      Extraction x = extractor.Extract(c.text);
      if (c.outcome == "no_code") {
        EXPECT_TRUE(x.kernels.empty());
        continue;
      }
      ASSERT_EQ(x.kernels.size(), 1u) << c.outcome << ": "
                                      << (x.refused.empty() ? "" : x.refused[0].second);
      EXPECT_TRUE(x.refused.empty()) << c.outcome << ": " << x.refused[0].second;
    }
  }
}

TEST(ScriptedKernels, EachMutationChangesTheSeed) {
  const std::string mma = SeedSource("02_mma_sync"), wgmma = SeedSource("03_wgmma_tma");
  EXPECT_NE(SwappedColumnPairs(mma), mma);
  EXPECT_NE(NoGpuWork(mma), mma);
  EXPECT_NE(WithKnob(mma, "BK", 32, 64), mma);
  const std::string skinny = WgmmaSkinnyStream(wgmma);
  for (const char* knob : {"BM 64", "BN 16", "STAGES 16", "CONSUMERS 1", "CONSUMER_REGS 224", "PERSISTENT 1",
                           "SWAP_AB 1", "SHAPE_M 16", "SHAPE_N 4096", "SHAPE_K 4096"}) {
    EXPECT_NE(skinny.find(absl::StrCat("#define ANVIL_", knob, "\n")), std::string::npos) << knob;
  }
}

TEST(ScriptedKernels, TheEndpointServesNChoicesAndRepairsWithTheSeed) {
  ScriptedReply r = KernelAnswer({"POST", "/v1/chat/completions", {}, R"({"n": 5, "messages": [{}, {}]})"}, 2);
  nlohmann::json body = nlohmann::json::parse(r.body);
  ASSERT_EQ(body["choices"].size(), 5u);
  EXPECT_NE(body["choices"][2]["message"]["content"].get<std::string>().find("__floats2half2_rn(v1, v0)"),
            std::string::npos);
  r = KernelAnswer({"POST", "/v1/chat/completions", {}, R"({"n": 1, "messages": [{}, {}, {}, {}]})"}, 3);
  body = nlohmann::json::parse(r.body);
  ASSERT_EQ(body["choices"].size(), 1u);
  EXPECT_NE(body["choices"][0]["message"]["content"].get<std::string>().find("// repair 3"), std::string::npos);
}

// Real nvcc for sm_90a (no GPU needed): the wrong-result variant and the
// DRAM-bound wgmma configuration compile, the broken one does not.
TEST(ScriptedKernels, TheBrokenOnesBuildAsExpected) {
  absl::StatusOr<Toolchain> t = Toolchain::Find();
  if (!t.ok()) GTEST_SKIP() << "no nvcc here: " << t.status();
  absl::StatusOr<sandbox::ScratchDir> dir = sandbox::ScratchDir::Create("/tmp", "scripted-kernels-");
  ASSERT_TRUE(dir.ok()) << dir.status();
  BuilderOptions o;
  o.toolchain = *t;
  o.cache_dir = dir->path() + "/cache";
  o.scratch_dir = dir->path();
  o.isolation = sandbox::Isolation::kAuto;  // about builds, not isolation
  Builder builder(o);
  const std::vector<ScriptedChoice> choices = FirstTurnChoices(0);
  const std::vector<std::pair<std::string, v1::Verdict>> cases = {
      {choices[2].text, v1::VERDICT_PASSED},
      {choices[1].text, v1::VERDICT_COMPILE_ERROR},
      {absl::StrCat("```cuda\n", WgmmaSkinnyStream(SeedSource("03_wgmma_tma")), "```\n"), v1::VERDICT_PASSED}};
  std::vector<v1::Candidate> candidates;
  Extractor extractor{sandbox::SourcePolicy{}};
  for (const auto& [text, verdict] : cases) {
    Extraction x = extractor.Extract(text);
    ASSERT_EQ(x.kernels.size(), 1u);
    v1::Candidate& c = candidates.emplace_back();
    c.set_source(x.kernels[0].source);
    c.set_layout(v1::LAYOUT_NT);
    c.set_arch("sm_90a");
    AssignCandidateId(c);
  }
  std::vector<absl::StatusOr<v1::Build>> builds = builder.BuildAll(candidates);
  for (size_t i = 0; i < cases.size(); ++i) {
    ASSERT_TRUE(builds[i].ok()) << builds[i].status();
    EXPECT_EQ(builds[i]->verdict(), cases[i].second) << i << ": " << builds[i]->error().substr(0, 2000);
  }
}

}  // namespace
}  // namespace anvil::testing
