#include "server/rpc/metrics.h"

#include <gtest/gtest.h>

namespace anvil::rpc {
namespace {

TEST(ServerMetrics, CountsAndSnapshotInTheText) {
  absl::StatusOr<std::unique_ptr<ServerMetrics>> m = ServerMetrics::Start("", [] {
    MetricsSnapshot s;
    s.jobs_by_state["running"] = 2;
    s.queue_depth = 3;
    s.store_bytes = 4096;
    return s;
  });
  ASSERT_TRUE(m.ok());
  (*m)->CandidateBuilt(true, 1.5);
  (*m)->CandidateBuilt(false, 0.2);
  (*m)->CandidateMeasured("passed", 0.3);
  (*m)->Rewarded(1.1);
  (*m)->RpcFinished("GetJob", "NOT_FOUND");
  const std::string text = (*m)->Text();
  for (const char* want : {"anvil_jobs{state=\"running\"} 2", "anvil_job_queue_depth 3",
                           "anvil_store_bytes 4096", "anvil_candidates_built_total{outcome=\"ok\"} 1",
                           "anvil_candidates_built_total{outcome=\"failed\"} 1",
                           "anvil_candidates_measured_total{verdict=\"passed\"} 1",
                           "anvil_build_seconds_count 2", "anvil_reward_count 1",
                           "anvil_rpcs_total{code=\"NOT_FOUND\",method=\"GetJob\"} 1"}) {
    EXPECT_NE(text.find(want), std::string::npos) << want << "\n" << text;
  }
}

TEST(ServerMetrics, ServesOverHttpOnAnyPort) {
  absl::StatusOr<std::unique_ptr<ServerMetrics>> m = ServerMetrics::Start("127.0.0.1:0", nullptr);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_GT((*m)->port(), 0);
}

}  // namespace
}  // namespace anvil::rpc
