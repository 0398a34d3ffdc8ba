// The LLM proposer on a GPU: a job on three dev shapes whose model is
// ScriptedLlmServer serving real kernel variants (the mma_sync and
// wgmma_tma seeds with other knobs, one that does not compile, one that
// returns without writing C, a refusal) through the real builder, sandbox and
// runner (LocalEvaluator, counter profiles on). Writes to
// $ANVIL_LLM_VERIFY_OUT (default: the test temp dir): llm_verify.db,
// trajectories.jsonl, job.txt and profiles.md (the counter profiles of two
// seeds with different bottlenecks and the hint each produced).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "proto/candidate.h"
#include "proto/problem.h"
#include "reward/profile_hint.h"
#include "server/job_service.h"
#include "server/local_evaluator.h"
#include "server/proposers/llm/bandit_policy.h"
#include "server/proposers/llm/llm_proposer.h"
#include "server/proposers/llm/trajectories.h"
#include "tests/scripted_llm_server.h"

#ifndef ANVIL_SOURCE_DIR
#define ANVIL_SOURCE_DIR ""
#endif

namespace anvil {
namespace {

using nlohmann::json;

std::string Dir(const char* env, const char* sub) {
  const char* d = std::getenv(env);
  return d ? d : std::string(ANVIL_SOURCE_DIR) + "/" + sub;
}

std::string Seed(const std::string& family) {
  std::ifstream in(Dir("ANVIL_SEEDS_DIR", "seeds") + "/" + family + "/kernel.cu");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string With(std::string source, const std::string& knob, int from, int to) {
  return absl::StrReplaceAll(source, {{absl::StrCat("#define ANVIL_", knob, " ", from),
                                       absl::StrCat("#define ANVIL_", knob, " ", to)}});
}

// A variant that returns before launching anything: C stays poisoned.
std::string Unwritten(const std::string& source) {
  return absl::StrReplaceAll(source, {{"void* workspace, cudaStream_t stream) {",
                                       "void* workspace, cudaStream_t stream) {\n  if (M > 0) return 0;"}});
}

std::string Fenced(const std::string& prose, const std::string& source) {
  return absl::StrCat(prose, "\n```cuda\n", source, "```\n");
}

testing::ScriptedReply Answer(const testing::ScriptedRequest& q, int index) {
  const json body = json::parse(q.body);
  if (body["messages"].size() > 2) {  // a repair turn: answer with the plain seed
    return testing::OpenAiReply({Fenced("Fixed.", absl::StrCat("// repair ", index, "\n", Seed("02_mma_sync")))});
  }
  const std::string mma = Seed("02_mma_sync"), wgmma = Seed("03_wgmma_tma");
  const std::vector<std::string> real = {
      With(mma, "STAGES", 4, 3), With(mma, "BK", 32, 64), wgmma, With(mma, "BM", 128, 64)};
  std::vector<std::string> texts = {
      Fenced("A deeper or wider K pipeline hides global latency.", absl::StrCat("// v", index, "\n", real[index % real.size()])),
      Fenced("", absl::StrCat("// b", index, "\n", mma, "\nthis line is not C++;\n")),
      Fenced("", absl::StrCat("// u", index, "\n", Unwritten(mma))),
      "No.",
  };
  texts.resize(std::min<size_t>(texts.size(), body.value("n", 1)));
  return testing::OpenAiReply(texts, 3000, 6000);
}

std::string OutDir() {
  const char* d = std::getenv("ANVIL_LLM_VERIFY_OUT");
  std::string out = d ? d : ::testing::TempDir() + "/llm_verify";
  std::filesystem::create_directories(out);
  return out;
}

// The counters and hint of one seed on one shape, as markdown.
std::string ProfileSection(LocalEvaluator& ev, const std::string& family, v1::Shape shape,
                           std::string* bottleneck) {
  v1::Candidate c;
  c.set_source(Seed(family));
  c.set_layout(v1::LAYOUT_NT);
  c.set_arch("sm_90a");
  c.set_proposer("seed");
  c.set_family(family);
  AssignCandidateId(c);
  c.set_name(family);
  std::vector<absl::StatusOr<v1::Build>> b = ev.Build({c});
  if (!b[0].ok() || b[0]->verdict() != v1::VERDICT_PASSED) return family + ": did not build\n";
  MeasureRequest r{c, *b[0], {shape}, false, {}};
  std::vector<absl::StatusOr<MeasureResult>> m = ev.Measure({r});
  if (!m[0].ok() || m[0]->measurements.empty()) return family + ": not measured\n";
  const v1::Measurement& meas = m[0]->measurements[0];
  ProfileHint hint = SummariseProfile(meas);
  *bottleneck = hint.bottleneck;
  std::string out = absl::StrCat("## ", family, " on ", ShapeName(shape), " nt: ",
                                 v1::Verdict_Name(meas.verdict()), "\n\n| counter | kernel |\n|---|---|\n");
  std::map<std::string, double> sorted(meas.profile().begin(), meas.profile().end());
  for (const auto& [k, v] : sorted) {
    if (k.rfind("hw.", 0) == 0) absl::StrAppend(&out, "| ", k, " | ", v, " |\n");
  }
  absl::StrAppend(&out, "\nprofile error: ", meas.profile_error().empty() ? "none" : meas.profile_error(),
                  "\n\nHint given to the model:\n```\n", hint.text, "\n```\n\n");
  return out;
}

TEST(LlmGpu, AJobOnThreeDevShapesWithRealKernelsAndTwoProfiledSeeds) {
  const std::string out = OutDir();
  const std::string db = out + "/llm_verify.db";
  std::filesystem::remove(db);
  std::unique_ptr<Store> store = std::move(*Store::Open(db));
  LocalEvaluatorOptions wo;
  wo.build_jobs = 8;
  wo.protocol.set_profile_counters(true);
  absl::StatusOr<std::unique_ptr<LocalEvaluator>> ev = LocalEvaluator::Create(wo);
  ASSERT_TRUE(ev.ok()) << ev.status();

  std::string small_b, large_b;
  std::string profiles = ProfileSection(**ev, "02_mma_sync", MakeShape(16, 4096, 4096), &small_b);
  profiles += ProfileSection(**ev, "03_wgmma_tma", MakeShape(8192, 8192, 8192), &large_b);
  std::ofstream(out + "/profiles.md") << profiles;
  std::cout << profiles;
  EXPECT_EQ(small_b, "memory");
  EXPECT_EQ(large_b, "compute");

  testing::ScriptedLlmServer server(Answer);
  llm::ClientOptions co;
  co.base_url = server.base_url();
  co.model = "scripted-kernels";
  std::unique_ptr<llm::Client> client = std::move(*llm::Client::Create(co));
  StoreLlmRecorder recorder(*store);
  JobServiceOptions o;
  o.store = store.get();
  o.evaluator = ev->get();
  o.default_figure = "device";
  o.build_chunk = 8;
  o.share_policy = [] { return MakeBanditSharePolicy(); };
  o.proposers = [&](const v1::OptimizeKernelRequest&) -> absl::StatusOr<std::vector<std::unique_ptr<Proposer>>> {
    LlmProposerOptions lo;
    lo.client = client.get();
    lo.recorder = &recorder;
    lo.prompts_dir = Dir("ANVIL_PROMPTS_DIR", "prompts");
    lo.max_prompts = 6;
    absl::StatusOr<std::unique_ptr<LlmProposer>> p = LlmProposer::Create(lo);
    if (!p.ok()) return p.status();
    std::vector<std::unique_ptr<Proposer>> v;
    v.push_back(std::move(*p));
    return v;
  };
  std::unique_ptr<JobService> service = std::move(*JobService::Create(std::move(o)));
  v1::OptimizeKernelRequest req;
  for (const v1::Shape& s : {MakeShape(16, 4096, 4096), MakeShape(1024, 6144, 4096), MakeShape(8192, 8192, 8192)}) {
    v1::Problem* p = req.add_problems();
    *p->mutable_shape() = s;
    p->set_layout(v1::LAYOUT_NT);
  }
  req.set_proposer("llm");
  absl::StatusOr<v1::Job> job = service->CreateJob(req);
  ASSERT_TRUE(job.ok()) << job.status();
  absl::StatusOr<v1::Job> done = service->RunJob(job->id());
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->state(), v1::JOB_STATE_SUCCEEDED) << done->error();
  std::ofstream summary(out + "/job.txt");
  summary << "job " << job->id() << "\n";
  for (const v1::ProblemProgress& p : done->problems()) {
    summary << ProblemName(p.problem()) << ": best " << p.best_candidate_id() << " " << p.best_us()
            << " us, speedup " << p.speedup() << " (device)\n";
  }
  absl::StatusOr<std::vector<LlmExchange>> ex = store->ListLlmExchanges(job->id());
  ASSERT_TRUE(ex.ok());
  std::map<std::string, int> kinds;
  for (const LlmExchange& e : *ex) {
    for (const LlmSample& s : e.samples) ++kinds[s.status + "/" + s.reward_kind];
  }
  for (const auto& [k, n] : kinds) summary << k << ": " << n << "\n";
  EXPECT_GT(kinds["proposed/speedup"], 0);
  EXPECT_GT(kinds["proposed/compile_error"], 0);
  EXPECT_GT(kinds["proposed/incorrect"], 0);
  std::ofstream jsonl(out + "/trajectories.jsonl");
  absl::StatusOr<TrajectoryCounts> counts = WriteTrajectories(*store, job->id(), jsonl);
  ASSERT_TRUE(counts.ok()) << counts.status();
  summary << counts->written << " trajectories written\n";
  EXPECT_GT(counts->written, 0);
}

}  // namespace
}  // namespace anvil
