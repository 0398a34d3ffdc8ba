// The LLM proposer on a GPU: a job on three dev shapes whose model is
// ScriptedLlmServer serving real kernel variants (tests/scripted_kernels.h:
// the mma_sync and wgmma_tma seeds with other knobs, one that does not
// compile, one that stores C's column pairs swapped, one that launches
// nothing, a refusal) through the real builder, sandbox and runner
// (LocalEvaluator, counter profiles on). Writes to $ANVIL_LLM_VERIFY_OUT
// (default: the test temp dir): llm_verify.db, trajectories.jsonl, job.txt
// and profiles.md (the counter profiles of seed configurations with
// different bottlenecks and the hint each produced).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "proto/candidate.h"
#include "proto/problem.h"
#include "reward/profile_hint.h"
#include "worker/local_evaluator.h"
#include "server/proposers/llm/trajectories.h"
#include "tests/scripted_job.h"
#include "tests/scripted_kernels.h"

namespace anvil {
namespace {

using testing::SeedSource;

std::string OutDir() {
  const char* d = std::getenv("ANVIL_LLM_VERIFY_OUT");
  std::string out = d ? d : ::testing::TempDir() + "/llm_verify";
  std::filesystem::create_directories(out);
  return out;
}

// The counters and hint of one seed configuration on one shape, as markdown.
std::string ProfileSection(LocalEvaluator& ev, const std::string& label, const std::string& source,
                           v1::Shape shape, ProfileHint* hint) {
  v1::Candidate c;
  c.set_source(source);
  c.set_layout(v1::LAYOUT_NT);
  c.set_arch("sm_90a");
  c.set_proposer("seed");
  AssignCandidateId(c);
  c.set_name(label);
  std::vector<absl::StatusOr<v1::Build>> b = ev.Build({c}, {});
  if (!b[0].ok()) return absl::StrCat(label, ": not built: ", b[0].status().ToString(), "\n");
  if (b[0]->verdict() != v1::VERDICT_PASSED) {
    return absl::StrCat(label, ": ", v1::Verdict_Name(b[0]->verdict()), "\n", b[0]->error().substr(0, 3000), "\n");
  }
  MeasureRequest r{c, *b[0], {shape}, false, {}, {}};
  std::vector<absl::StatusOr<MeasureResult>> m = ev.Measure({r}, {});
  if (!m[0].ok() || m[0]->measurements.empty()) {
    return absl::StrCat(label, ": not measured: ", m[0].ok() ? "no measurement" : m[0].status().ToString(), "\n");
  }
  const v1::Measurement& meas = m[0]->measurements[0];
  *hint = SummariseProfile(meas);
  std::string out = absl::StrCat("## ", label, " on ", ShapeName(shape), " nt: ",
                                 v1::Verdict_Name(meas.verdict()), "\n\n| counter | kernel |\n|---|---|\n");
  std::map<std::string, double> sorted(meas.profile().begin(), meas.profile().end());
  for (const auto& [k, v] : sorted) {
    if (k.rfind("hw.", 0) == 0) absl::StrAppend(&out, "| ", k, " | ", v, " |\n");
  }
  const ProfileFacts& f = hint->facts;
  absl::StrAppend(&out, "\nprofile error: ", meas.profile_error().empty() ? "none" : meas.profile_error(),
                  "\n\nRead by the rules: tensor pipe ", f.tensor_pct, "%, DRAM ", 100 * f.dram_fraction,
                  "% of attainable over ", f.kernel_us, " us, SM balance ", f.sm_balance,
                  "\n\nHint given to the model:\n```\n", hint->text, "\n```\n\n");
  return out;
}

std::unique_ptr<LocalEvaluator> ProfilingEvaluator() {
  LocalEvaluatorOptions wo;
  wo.build_jobs = 8;
  wo.protocol.set_profile_counters(true);
  absl::StatusOr<std::unique_ptr<LocalEvaluator>> ev = LocalEvaluator::Create(wo);
  EXPECT_TRUE(ev.ok()) << ev.status();
  return ev.ok() ? std::move(*ev) : nullptr;
}

// Three seed configurations whose counters show three bottlenecks: on the
// memory-bound 16x4096x4096, 02_mma_sync's default 128x128 tiles make 32 CTAs
// for 132 SMs (imbalance: neither roof reached), 03_wgmma_tma's fastest
// configuration there streams B at HBM speed (memory); on 8192^3 the
// wgmma seed keeps the tensor pipe busy (compute). Each hint is checked
// against the counter facts it was read from (reward/profile_hint.h).
TEST(LlmGpu, SeedsWithDifferentBottlenecksGetTheHintTheirCountersShow) {
  const std::string out = OutDir();
  std::unique_ptr<LocalEvaluator> ev = ProfilingEvaluator();
  ASSERT_NE(ev, nullptr);
  const v1::Shape small = MakeShape(16, 4096, 4096), large = MakeShape(8192, 8192, 8192);
  ProfileHint few_ctas, stream, big;
  std::string profiles =
      ProfileSection(*ev, "02_mma_sync (default 128x128 tiles)", SeedSource("02_mma_sync"), small, &few_ctas);
  profiles += ProfileSection(*ev, "03_wgmma_tma (swap-AB 64x16, 16 stages, persistent)",
                             testing::WgmmaSkinnyStream(SeedSource("03_wgmma_tma")), small, &stream);
  profiles += ProfileSection(*ev, "03_wgmma_tma (default)", SeedSource("03_wgmma_tma"), large, &big);
  std::ofstream(out + "/profiles.md") << profiles;
  std::cout << profiles;

  EXPECT_EQ(few_ctas.bottleneck, "imbalance");
  EXPECT_LT(few_ctas.facts.sm_balance, kImbalanceSmBalance);
  EXPECT_LT(few_ctas.facts.dram_fraction, kMemoryDramFraction);
  EXPECT_LT(few_ctas.facts.tensor_pct, kComputeTensorPct);
  EXPECT_EQ(stream.bottleneck, "memory");
  EXPECT_GE(stream.facts.dram_fraction, kMemoryDramFraction);
  EXPECT_LT(stream.facts.tensor_pct, kComputeTensorPct);
  EXPECT_EQ(big.bottleneck, "compute");
  EXPECT_GE(big.facts.tensor_pct, kComputeTensorPct);
  EXPECT_NE(stream.bottleneck, big.bottleneck);
  EXPECT_NE(stream.bottleneck, few_ctas.bottleneck);
}

TEST(LlmGpu, AJobOnThreeDevShapesWithRealKernels) {
  const std::string out = OutDir();
  const std::string db = out + "/llm_verify.db";
  std::filesystem::remove(db);
  std::unique_ptr<Store> store = std::move(*Store::Open(db));
  std::unique_ptr<LocalEvaluator> ev = ProfilingEvaluator();
  ASSERT_NE(ev, nullptr);
  absl::StatusOr<testing::ScriptedJobOutcome> r = testing::RunScriptedJob(
      *store, *ev, {MakeShape(16, 4096, 4096), MakeShape(1024, 6144, 4096), MakeShape(8192, 8192, 8192)});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->job.state(), v1::JOB_STATE_SUCCEEDED) << r->job.error();
  std::ofstream summary(out + "/job.txt");
  summary << "job " << r->job.id() << "\n";
  for (const v1::ProblemProgress& p : r->job.problems()) {
    summary << ProblemName(p.problem()) << ": best " << p.best_candidate_id() << " " << p.best_us()
            << " us, speedup " << p.speedup() << " (device)\n";
  }
  for (const auto& [k, n] : r->kinds) summary << k << ": " << n << "\n";
  summary << r->exchanges << " exchanges; repair turn after an incorrect result: "
          << (r->incorrect_repaired ? "yes" : "no") << "\n";
  EXPECT_GT(r->kinds["proposed/speedup"], 0);
  EXPECT_GT(r->kinds["proposed/compile_error"], 0);
  EXPECT_GT(r->kinds["proposed/incorrect"], 0);  // the swapped column pairs
  EXPECT_GT(r->kinds["proposed/cheat"], 0);      // the call that launches nothing
  EXPECT_GT(r->statuses["no_code"], 0);          // the refusal
  EXPECT_TRUE(r->incorrect_repaired);
  EXPECT_TRUE(r->failures_penalised);
  std::ofstream jsonl(out + "/trajectories.jsonl");
  absl::StatusOr<TrajectoryCounts> counts = WriteTrajectories(*store, r->job.id(), jsonl);
  ASSERT_TRUE(counts.ok()) << counts.status();
  summary << counts->written << " trajectories written\n";
  EXPECT_GT(counts->written, 0);
}

}  // namespace
}  // namespace anvil
