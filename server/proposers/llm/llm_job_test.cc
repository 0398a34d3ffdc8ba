// A whole job on the CPU with the LLM proposer: the coordinator's JobService,
// a real store, ScriptedLlmServer answering with real kernel variants (the
// mma_sync seed with other pipeline depths, a broken one, an incorrect one,
// refusals and garbage), and KnobTimedEvaluator, an evaluator test double that
// "compiles" and "times" a variant from the knobs written in its source.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "proto/problem.h"
#include "server/job_service.h"
#include "server/proposers/llm/bandit_policy.h"
#include "server/proposers/llm/llm_proposer.h"
#include "server/proposers/llm/trajectories.h"
#include "tests/per_shape_evaluator.h"
#include "tests/scripted_llm_server.h"

namespace anvil {
namespace {

using nlohmann::json;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The seed with its default pipeline depth and K tile replaced.
std::string Variant(int stages, int bk, const std::string& extra = "") {
  std::string s = ReadFile(std::string(ANVIL_SOURCE_DIR) + "/seeds/02_mma_sync/kernel.cu");
  s = absl::StrReplaceAll(s, {{"#define ANVIL_STAGES 4", absl::StrCat("#define ANVIL_STAGES ", stages)},
                              {"#define ANVIL_BK 32", absl::StrCat("#define ANVIL_BK ", bk)}});
  return extra + s;
}

int Knob(const std::string& source, const std::string& name) {
  std::smatch m;
  std::regex re("#define ANVIL_" + name + " ([0-9]+)");
  return std::regex_search(source, m, re) ? std::stoi(m[1]) : 0;
}

// Builds fail on a source marked ANVIL_BROKEN_SYNTAX; a source marked
// ANVIL_WRONG_INDEX is measured incorrect; otherwise the time falls with the
// pipeline depth and K tile: 60 + 160/stages + 640/bk us (+ M/1000), against
// a baseline of 125 us: a 4-stage, 64-wide variant (110 us) beats a 4-stage,
// 32-wide one (120 us), and a 2-stage one (160 us) is slower than the baseline.
class KnobTimedEvaluator : public testing::PerShapeEvaluator {
 protected:
  v1::Build BuildOne(const v1::Candidate& c) override {
    v1::Build b;
    const bool broken = c.source().find("ANVIL_BROKEN_SYNTAX") != std::string::npos;
    b.set_verdict(broken ? v1::VERDICT_COMPILE_ERROR : v1::VERDICT_PASSED);
    if (broken) b.set_error("kernel.cu(1): error: identifier \"ANVIL_BROKEN_SYNTAX\" is undefined");
    v1::KernelUsage* u = b.add_usage();
    u->set_registers(96 + 8 * Knob(c.source(), "STAGES"));
    return b;
  }
  v1::Measurement MeasureOne(const v1::Candidate& c, const v1::Shape& s) override {
    v1::Measurement m;
    *m.mutable_problem() = MakeProblem("FAKE-H100", "sm_90a", s, c.layout());
    if (c.source().find("ANVIL_WRONG_INDEX") != std::string::npos) {
      m.set_verdict(v1::VERDICT_INCORRECT);
      m.set_reason("wrong_result");
      m.set_detail("relative error 0.71 on random inputs");
      return m;
    }
    const int stages = std::max(1, Knob(c.source(), "STAGES")), bk = std::max(8, Knob(c.source(), "BK"));
    const double us = 60 + 160.0 / stages + 640.0 / bk + s.m() / 1000.0;
    m.set_verdict(v1::VERDICT_PASSED);
    m.mutable_timings()->mutable_device()->set_median_us(us);
    v1::Baseline* b = m.add_baselines();
    b->set_name("cublas");
    b->mutable_timings()->mutable_device()->set_median_us(125 + s.m() / 1000.0);
    (*m.mutable_profile())["hw.sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"] = 10.0 * stages;
    return m;
  }
};

// The scripted model: a first answer per prompt with four samples (a real
// variant, a broken one, an incorrect one, a refusal); repairs answer with a
// fixed kernel. Variants differ per prompt so nothing is a duplicate.
testing::ScriptedReply Answer(const testing::ScriptedRequest& q, int index) {
  json body = json::parse(q.body);
  const int n = body.value("n", 1);
  const size_t turns = body["messages"].size();
  if (turns > 2) {  // system, user, assistant, user: a repair
    return testing::OpenAiReply({"The index was wrong; fixed.\n```cuda\n" + Variant(4, 64, absl::StrCat("// repair ", index, "\n")) + "```"});
  }
  std::vector<std::string> texts = {
      "Deeper pipelines hide latency.\n```cuda\n" + Variant(2 + index % 3, 32, absl::StrCat("// v", index, "\n")) + "```",
      "```cu\n" + Variant(4, 32, absl::StrCat("#define ANVIL_BROKEN_SYNTAX // b", index, "\n")) + "```",
      "~~~cuda\n" + Variant(3, 32, absl::StrCat("#define ANVIL_WRONG_INDEX // w", index, "\n")) + "~~~",
      "I would rather not write CUDA today.",
  };
  texts.resize(std::min<size_t>(texts.size(), n));
  return testing::OpenAiReply(texts, 900, 1500);
}

class LlmJobTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = ::testing::TempDir() + "/llm_job_test.db";
    std::filesystem::remove(path_);
    store_ = std::move(*Store::Open(path_));
  }

  // A job on two problems (M = 256 and 2048) with the LLM proposer alone,
  // asking the scripted server 10 prompts at most, run to its end.
  void RunJob(std::string* job_id, v1::Job* done) {
    llm::ClientOptions co;
    co.base_url = server_.base_url();
    co.model = "scripted";
    co.seed = 1;
    co.usd_per_prompt_token = 1e-6;
    client_ = std::move(*llm::Client::Create(co));
    JobServiceOptions o;
    o.store = store_.get();
    o.evaluator = &evaluator_;
    o.default_figure = "device";
    o.build_chunk = 4;
    o.share_policy = [] { return MakeBanditSharePolicy(); };
    o.proposers = [this](const v1::OptimizeKernelRequest&) -> absl::StatusOr<std::vector<std::unique_ptr<Proposer>>> {
      LlmProposerOptions lo;
      lo.client = client_.get();
      lo.prompts_dir = std::string(ANVIL_SOURCE_DIR) + "/prompts";
      lo.max_prompts = 10;
      absl::StatusOr<std::unique_ptr<LlmProposer>> p = LlmProposer::Create(lo);
      if (!p.ok()) return p.status();
      std::vector<std::unique_ptr<Proposer>> out;
      out.push_back(std::move(*p));
      return out;
    };
    service_ = std::move(*JobService::Create(std::move(o)));
    v1::OptimizeKernelRequest req;
    for (int m : {256, 2048}) {
      v1::Problem* p = req.add_problems();
      *p->mutable_shape() = MakeShape(m, 4096, 4096);
      p->set_layout(v1::LAYOUT_NT);
    }
    req.set_proposer("llm");
    absl::StatusOr<v1::Job> job = service_->CreateJob(req);
    ASSERT_TRUE(job.ok()) << job.status();
    *job_id = job->id();
    absl::StatusOr<v1::Job> result = service_->RunJob(job->id());
    ASSERT_TRUE(result.ok()) << result.status();
    *done = *std::move(result);
  }

  std::string path_;
  std::unique_ptr<Store> store_;
  testing::ScriptedLlmServer server_{Answer};
  std::unique_ptr<llm::Client> client_;
  KnobTimedEvaluator evaluator_;
  std::unique_ptr<JobService> service_;
};

// The job's exchanges: every prompt's version, system prompt and cost; each
// group's advantages normalised; repairs after failed builds or wrong
// answers; contrastive prompts later on; every recipe tried. Returns how
// many samples were rewarded.
int ExpectExchanges(const std::vector<LlmExchange>& ex) {
  std::map<std::string, int> statuses, recipes;
  int rewarded = 0, with_advantage = 0;
  for (const LlmExchange& e : ex) {
    ++recipes[e.recipe];
    EXPECT_EQ(e.prompt_version, "2026-11-26");
    EXPECT_NE(e.system_prompt.find("anvil_workspace_bytes"), std::string::npos);
    EXPECT_GT(e.cost_usd, 0);
    double sum = 0;
    int scored = 0;
    for (const LlmSample& s : e.samples) {
      ++statuses[s.status];
      rewarded += s.reward.has_value();
      if (s.advantage.has_value()) {
        sum += *s.advantage;
        ++scored;
        ++with_advantage;
      }
    }
    if (scored > 1) {
      EXPECT_NEAR(sum, 0, 1e-6) << "advantages are group-normalised";
    }
    if (e.recipe == "repair") {
      EXPECT_TRUE(e.prompt.find("did not compile") != std::string::npos ||
                  e.prompt.find("was incorrect") != std::string::npos) << e.prompt;
      EXPECT_EQ(json::parse(e.messages_json).size(), 3u);  // user, assistant, repair
    }
  }
  EXPECT_GT(statuses["proposed"], 0);
  EXPECT_GT(statuses["no_code"], 0);
  EXPECT_GT(recipes["repair"], 0);
  EXPECT_GT(recipes["contrast"] + recipes["neighbours"] + recipes["best"], 0);
  EXPECT_GT(rewarded, 10);
  EXPECT_GT(with_advantage, 10);
  // A later prompt carried the measured exemplars and the best's bottleneck.
  bool contrastive = false;
  for (const LlmExchange& e : ex) {
    contrastive |= e.prompt.find("the current best") != std::string::npos &&
                   e.prompt.find("tensor pipe busy") != std::string::npos;
  }
  EXPECT_TRUE(contrastive);
  // The recipe bandit tries every recipe before it favours one.
  EXPECT_GE((recipes["contrast"] > 0) + (recipes["neighbours"] > 0) + (recipes["best"] > 0), 2);
  return rewarded;
}

// The export: one JSON line per rewarded sample, TRL's conversational shape.
void ExpectTrajectories(Store& store, const std::string& job_id, int rewarded) {
  std::stringstream jsonl;
  absl::StatusOr<TrajectoryCounts> counts = WriteTrajectories(store, job_id, jsonl);
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(counts->written, rewarded);
  std::string line;
  int lines = 0;
  while (std::getline(jsonl, line)) {
    json j = json::parse(line);
    ++lines;
    EXPECT_EQ(j["prompt"][0]["role"], "system");
    EXPECT_EQ(j["completion"][0]["role"], "assistant");
    EXPECT_TRUE(j["reward"].is_number());
    EXPECT_TRUE(j["advantage"].is_number());
    EXPECT_EQ(j["label"], j["reward"].get<double>() > 0);
  }
  EXPECT_EQ(lines, rewarded);
  EXPECT_EQ(WriteTrajectories(store, "no-such-job", jsonl).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(LlmJobTest, AWholeJobStoresExchangesRewardsAdvantagesAndRepairs) {
  std::string job_id;
  v1::Job done;
  ASSERT_NO_FATAL_FAILURE(RunJob(&job_id, &done));
  EXPECT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.error();
  for (const v1::ProblemProgress& p : done.problems()) {
    EXPECT_GT(p.speedup(), 1.0) << ProblemName(p.problem());  // variants beat the baseline
  }
  absl::StatusOr<std::vector<LlmExchange>> ex = store_->ListLlmExchanges(job_id);
  ASSERT_TRUE(ex.ok()) << ex.status();
  ASSERT_EQ(ex->size(), 10u);  // max_prompts, repairs included
  const int rewarded = ExpectExchanges(*ex);
  ExpectTrajectories(*store_, job_id, rewarded);
}

}  // namespace
}  // namespace anvil
