// anvil serve and anvil-server run the proposers local `anvil optimize`
// makes (server/proposers/factory.h), whether jobs measure on this node's GPU
// or on the fleet's: the embedded search over the seeds, the LLM proposer
// when jobs.llm_config names an endpoint.
#include "server/rpc/local_components.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace anvil {
namespace {

std::vector<std::string> Names(const ProposerSet& set, const std::string& proposer) {
  v1::OptimizeKernelRequest r;
  r.set_proposer(proposer);
  r.set_reward_figure("graph-cold");
  absl::StatusOr<std::vector<std::unique_ptr<Proposer>>> made = set.factory(r);
  EXPECT_TRUE(made.ok()) << made.status();
  std::vector<std::string> names;
  if (made.ok()) {
    for (const auto& p : *made) names.push_back(p->name());
  }
  return names;
}

TEST(LocalServeComponentsTest, ServedJobsRunTheProposersLocalOptimizeRuns) {
  const std::string dir = ::testing::TempDir() + "/local_components";
  std::filesystem::create_directories(dir);
  EXPECT_FALSE(LocalServeComponents().proposers);  // ServeMain makes the node's
  const auto node_set = [](const ServerOptions& o) -> absl::StatusOr<ProposerSet> {
    absl::StatusOr<ProposerSetupOptions> p = NodeProposers(o);
    if (!p.ok()) return p.status();
    return MakeProposerSet(*std::move(p));
  };
  for (bool fleet : {false, true}) {
    ServerOptions o;
    o.fleet_enabled = fleet;
    absl::StatusOr<ProposerSet> set = node_set(o);
    ASSERT_TRUE(set.ok()) << set.status();
    EXPECT_EQ(Names(*set, ""), std::vector<std::string>{"embedded"});
    EXPECT_FALSE(set->share_policy);
    v1::OptimizeKernelRequest llm;
    llm.set_proposer("llm");
    EXPECT_EQ(set->factory(llm).status().code(), absl::StatusCode::kFailedPrecondition);
  }
  ServerOptions with_llm;
  with_llm.llm_config = dir + "/llm.json";
  std::ofstream(with_llm.llm_config) << R"({"client": {"base_url": "http://127.0.0.1:9/v1", "model": "m"}})";
  absl::StatusOr<ProposerSet> set = node_set(with_llm);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(Names(*set, "embedded").size(), 2u);
  EXPECT_TRUE(set->share_policy);
}

}  // namespace
}  // namespace anvil
