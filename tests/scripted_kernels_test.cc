// The scripted endpoint's kernels on the CPU: every variant passes the
// source policy and ABI checks the LLM proposer applies before nvcc, each
// mutation really changed the seed, with nvcc present the broken ones build
// (or fail to build) as the GPU test expects, and the GPU test's job, on
// VerdictBySourceEvaluator, ends in every kind it asserts there.
#include "tests/scripted_kernels.h"

#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>
#include <optional>

#include "absl/strings/str_cat.h"
#include "proto/candidate.h"
#include "proto/problem.h"
#include "sandbox/sandbox.h"
#include "server/proposers/llm/extract.h"
#include "tests/per_shape_evaluator.h"
#include "tests/scripted_job.h"
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

// An evaluator test double with the runner's verdicts for the scripted
// variants, read from their source: the compile error nvcc gives the stray
// line, INCORRECT for swapped column pairs, CHEAT for a call that launches
// nothing, PASSED (faster with more stages) for the rest.
class VerdictBySourceEvaluator : public PerShapeEvaluator {
 protected:
  v1::Build BuildOne(const v1::Candidate& c) override {
    v1::Build b;
    const bool broken = Has(c, "this line is not C++;");
    b.set_verdict(broken ? v1::VERDICT_COMPILE_ERROR : v1::VERDICT_PASSED);
    if (broken) b.set_error("kernel.cu(760): error: this declaration has no storage class or type specifier");
    return b;
  }
  v1::Measurement MeasureOne(const v1::Candidate& c, const v1::Shape& s) override {
    v1::Measurement m;
    *m.mutable_problem() = MakeProblem("FAKE-H100", "sm_90a", s, c.layout());
    if (Has(c, "__floats2half2_rn(v1, v0)")) {
      m.set_verdict(v1::VERDICT_INCORRECT);
      m.set_reason("wrong_result");
      m.set_detail("error beyond fp16 rounding of the exact result 1.4 exceeds 0.0003");
      return m;
    }
    if (Has(c, "if (M > 0) return 0;")) {
      m.set_verdict(v1::VERDICT_CHEAT);
      m.set_reason("no_gpu_work");
      m.set_detail("the call launched no GPU work");
      return m;
    }
    m.set_verdict(v1::VERDICT_PASSED);
    const double us = 100 - 5.0 * Has(c, "#define ANVIL_STAGES 3\n") + s.m() / 1000.0;
    m.mutable_timings()->mutable_device()->set_median_us(us);
    v1::Baseline* b = m.add_baselines();
    b->set_name("cublas");
    b->mutable_timings()->mutable_device()->set_median_us(110 + s.m() / 1000.0);
    return m;
  }

 private:
  static bool Has(const v1::Candidate& c, const char* s) { return c.source().find(s) != std::string::npos; }
};

TEST(ScriptedKernels, TheGpuTestsJobEndsInEveryKindItAsserts) {
  const std::string db = ::testing::TempDir() + "/scripted_job.db";
  std::filesystem::remove(db);
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(db);
  ASSERT_TRUE(store.ok()) << store.status();
  VerdictBySourceEvaluator evaluator;
  absl::StatusOr<ScriptedJobOutcome> r = RunScriptedJob(
      **store, evaluator, {MakeShape(16, 4096, 4096), MakeShape(1024, 6144, 4096), MakeShape(8192, 8192, 8192)});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->job.state(), v1::JOB_STATE_SUCCEEDED) << r->job.error();
  EXPECT_EQ(r->exchanges, 12);
  EXPECT_GT(r->kinds["proposed/speedup"], 0);
  EXPECT_GT(r->kinds["proposed/compile_error"], 0);
  EXPECT_GT(r->kinds["proposed/incorrect"], 0);
  EXPECT_GT(r->kinds["proposed/cheat"], 0);
  EXPECT_GT(r->statuses["no_code"], 0);
  EXPECT_TRUE(r->incorrect_repaired);
  EXPECT_TRUE(r->failures_penalised);
}

}  // namespace
}  // namespace anvil::testing
