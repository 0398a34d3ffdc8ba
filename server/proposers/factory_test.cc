// The proposer factory local `anvil optimize` and `anvil serve` share: the
// names a request may give, the node's default set, the LLM proposer beside
// the embedded search (an endpoint configured, not contacted) and the share
// policy that comes with it.
#include "server/proposers/factory.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "server/proposers/llm/llm_proposer.h"

namespace anvil {
namespace {

class ProposerFactoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/proposer_factory_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::create_directories(dir_);
    absl::StatusOr<std::vector<SeedFamily>> seeds = LoadSeeds(ANVIL_SOURCE_DIR "/seeds");
    ASSERT_TRUE(seeds.ok()) << seeds.status();
    seeds_ = *seeds;
  }

  ProposerSetupOptions Options(bool llm) {
    ProposerSetupOptions o;
    o.seeds = seeds_;
    o.prompts_dir = ANVIL_SOURCE_DIR "/prompts";
    if (llm) {  // an endpoint nobody listens on: making the proposer contacts nothing
      o.llm_config = dir_ + "/llm.json";
      std::ofstream(o.llm_config) << R"({"client": {"base_url": "http://127.0.0.1:9/v1", "model": "m"}})";
    }
    return o;
  }

  static v1::OptimizeKernelRequest Request(const std::string& proposer) {
    v1::OptimizeKernelRequest r;
    r.set_proposer(proposer);
    r.set_reward_figure("graph-cold");
    r.mutable_budget()->set_max_wall_seconds(60);
    return r;
  }

  static std::vector<std::string> Names(const ProposerSet& set, const std::string& proposer) {
    absl::StatusOr<std::vector<std::unique_ptr<Proposer>>> made = set.factory(Request(proposer));
    EXPECT_TRUE(made.ok()) << made.status();
    std::vector<std::string> names;
    if (made.ok()) {
      for (const auto& p : *made) names.push_back(p->name());
    }
    return names;
  }

  std::string dir_;
  std::vector<SeedFamily> seeds_;
};

TEST_F(ProposerFactoryTest, DefaultIsTheEmbeddedSearchWithEqualShares) {
  ProposerSet set = MakeProposerSet(Options(false));
  EXPECT_EQ(Names(set, ""), std::vector<std::string>{"embedded"});
  EXPECT_EQ(Names(set, "embedded"), std::vector<std::string>{"embedded"});
  EXPECT_FALSE(set.share_policy) << "one proposer: the service's equal shares";
}

TEST_F(ProposerFactoryTest, AnLlmEndpointJoinsTheDefaultSetWithTheBandit) {
  ProposerSet set = MakeProposerSet(Options(true));
  const std::vector<std::string> both = Names(set, "embedded");
  ASSERT_EQ(both.size(), 2u);
  EXPECT_EQ(both[0], "embedded");
  EXPECT_NE(both[1], "embedded");
  EXPECT_EQ(Names(set, "llm").size(), 1u);
  EXPECT_EQ(Names(set, "embedded, llm").size(), 2u);
  ASSERT_TRUE(set.share_policy);
  EXPECT_NE(set.share_policy(), nullptr);
}

TEST_F(ProposerFactoryTest, BadNamesAreRefusedWithTheirCodes) {
  ProposerSet set = MakeProposerSet(Options(false));
  EXPECT_EQ(set.factory(Request("genetic")).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(set.factory(Request("embedded,genetic")).status().code(), absl::StatusCode::kInvalidArgument);
  absl::Status no_llm = set.factory(Request("llm")).status();
  EXPECT_EQ(no_llm.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(no_llm.message().find("jobs.llm_config"), std::string::npos) << no_llm;
}

TEST_F(ProposerFactoryTest, ABrokenLlmConfigIsTheRequestsError) {
  ProposerSetupOptions o = Options(true);
  std::ofstream(o.llm_config) << "not json";
  ProposerSet set = MakeProposerSet(std::move(o));
  EXPECT_EQ(set.factory(Request("")).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ProposerFactoryTest, NoSeedsIsAPreconditionNotACrash) {
  ProposerSetupOptions o = Options(false);
  o.seeds.clear();
  EXPECT_EQ(MakeProposerSet(std::move(o)).factory(Request("")).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace anvil
