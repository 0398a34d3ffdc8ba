// FairScheduler::PickRound: a round's n counts the proposals that need a
// build; built ones ride beside them, up to the extra allowed.
#include "server/fair_scheduler.h"

#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "proto/problem.h"

namespace anvil {
namespace {

Proposal On(const std::string& id, int problem) {
  Proposal p;
  p.candidate.set_id(id);
  p.problems = {problem};
  return p;
}

class PickRoundTest : public ::testing::Test {
 protected:
  PickRoundTest() : policy_(MakeEqualSharePolicy()), scheduler_({"one"}, policy_.get(), 1000) {
    for (int i = 0; i < 4; ++i) {
      ProblemView v;
      v.spec = {MakeShape(64 * (i + 1), 64, 64), v1::LAYOUT_NT};
      v.active = true;
      problems_.push_back(v);
    }
    // Six to build ("new-*") and six built ("old-*"), on the four problems.
    std::vector<Proposal> proposals;
    for (int i = 0; i < 6; ++i) proposals.push_back(On("new-" + std::to_string(i), i % 4));
    for (int i = 0; i < 6; ++i) proposals.push_back(On("old-" + std::to_string(i), i % 4));
    std::vector<ProposerUsage> usage(1);
    const absl::Status st = scheduler_.Refill(
        [&](int, int) -> absl::StatusOr<std::vector<Proposal>> { return proposals; }, usage, false);
    EXPECT_TRUE(st.ok()) << st;
  }
  static bool Built(const Proposal& p) { return p.candidate.id().rfind("old-", 0) == 0; }
  static int Count(const std::vector<FairScheduler::Pending>& got, bool built) {
    int n = 0;
    for (const FairScheduler::Pending& p : got) n += Built(p.proposal) == built;
    return n;
  }

  std::unique_ptr<SharePolicy> policy_;
  FairScheduler scheduler_;
  std::vector<ProblemView> problems_;
};

TEST_F(PickRoundTest, WithoutThePredicateEveryProposalCounts) {
  const std::vector<FairScheduler::Pending> got = scheduler_.PickRound(4, problems_, {ProposerUsage()});
  EXPECT_EQ(got.size(), 4u);
}

TEST_F(PickRoundTest, BuiltProposalsRideBesideTheBuildsUpToTheExtra) {
  const std::vector<FairScheduler::Pending> got =
      scheduler_.PickRound(4, problems_, {ProposerUsage()}, &PickRoundTest::Built, 3);
  EXPECT_EQ(Count(got, /*built=*/false), 4);
  EXPECT_EQ(Count(got, /*built=*/true), 3);
  // The rest of the built ones count against n once the extra is spent.
  const std::vector<FairScheduler::Pending> next =
      scheduler_.PickRound(4, problems_, {ProposerUsage()}, &PickRoundTest::Built, 0);
  EXPECT_EQ(next.size(), 4u);
}

}  // namespace
}  // namespace anvil
