#include "worker/runner_host.h"

#include <sys/stat.h>

#include <fstream>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "proto/problem.h"
#include "sandbox/sandbox.h"

namespace anvil {
namespace {

v1::LtAlgo Algo(int m, v1::Layout layout, const std::string& version, const std::string& bytes) {
  v1::LtAlgo a;
  *a.mutable_shape() = MakeShape(m, 64, 64);
  a.set_layout(layout);
  a.set_cublas_version(version);
  a.set_algo(bytes);
  return a;
}

// A runner takes the first stored choice that matches its problem, so a newly
// tuned one must replace the earlier (a retune mark included), not follow it.
TEST(MergeTunedAlgo, ReplacesTheSameProblemsChoiceAndKeepsOthers) {
  std::vector<v1::LtAlgo> algos = {Algo(128, v1::LAYOUT_NT, "130100", "old"),
                                   Algo(256, v1::LAYOUT_NT, "130100", "other"),
                                   Algo(128, v1::LAYOUT_NN, "130100", "nn"),
                                   Algo(128, v1::LAYOUT_NT, "130000", "older cublas")};
  algos[0].set_retune(true);
  MergeTunedAlgo(algos, Algo(128, v1::LAYOUT_NT, "130100", "new"));
  ASSERT_EQ(algos.size(), 4u);
  int matching = 0;
  for (const v1::LtAlgo& a : algos) {
    if (a.shape().m() == 128 && a.layout() == v1::LAYOUT_NT && a.cublas_version() == "130100") {
      ++matching;
      EXPECT_EQ(a.algo(), "new");
      EXPECT_FALSE(a.retune());
    }
  }
  EXPECT_EQ(matching, 1);
  EXPECT_EQ(algos[0].algo(), "other");
  EXPECT_EQ(algos[1].algo(), "nn");
  EXPECT_EQ(algos[2].algo(), "older cublas");
}

TEST(MergeTunedAlgo, AppendsAChoiceForANewProblem) {
  std::vector<v1::LtAlgo> algos;
  MergeTunedAlgo(algos, Algo(64, v1::LAYOUT_NN, "130100", "first"));
  ASSERT_EQ(algos.size(), 1u);
  EXPECT_EQ(algos[0].algo(), "first");
}

// A stand-in for anvil-runner (a test double): a shell script that speaks
// the runner's protocol as far as `events`, then does what `then` says.
class FakeRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<sandbox::ScratchDir> dir = sandbox::ScratchDir::Create("/tmp", "fake-runner-test-");
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_.emplace(std::move(*dir));
    ASSERT_EQ(mkdir((dir_->path() + "/bin").c_str(), 0755), 0);
    library_ = dir_->path() + "/candidate.so";
    std::ofstream(library_) << "not a library";
    chmod(library_.c_str(), 0644);
  }
  RunnerHost Make(const std::string& then) {
    const std::string runner = dir_->path() + "/bin/fake-runner";
    std::ofstream(runner) << "#!/bin/sh\ncat > /dev/null\n"
                          << "echo '{\"info\":{\"gpu\":\"FakeGPU\"}}'\n"
                          << "echo '{\"problem_start\":{\"reference_call_us\":10,"
                          << "\"candidate_calls\":100,\"baseline_calls\":300}}'\n"
                          << then << "\n";
    chmod(runner.c_str(), 0755);
    RunnerHostOptions o;
    o.toolchain.runner = runner;
    o.toolchain.cuda_root = "/usr";
    o.isolation = sandbox::Isolation::kAuto;  // about limits, not isolation
    o.limits.floor = absl::Seconds(1);
    o.limits.output_cap_bytes = 1 << 20;
    return RunnerHost(o);
  }
  absl::StatusOr<RunnerResults> Run(RunnerHost& e) {
    v1::Candidate c;
    c.set_id("fake");
    c.set_layout(v1::LAYOUT_NT);
    v1::Build b;
    b.set_verdict(v1::VERDICT_PASSED);
    b.set_artifact(library_);
    return e.Measure(c, b, {MakeShape(1000, 1000, 1000), MakeShape(64, 64, 64)}, {});
  }
  std::optional<sandbox::ScratchDir> dir_;
  std::string library_;
};

// The fixed limit would be 60 s + 60 s per problem: a hang after the
// problem's start costs its scaled limit (1 s floor here) instead.
TEST_F(FakeRunnerTest, AHangIsKilledAtItsScaledLimitAndTheRestIsNotRun) {
  RunnerHost e = Make("sleep 1000");
  absl::StatusOr<RunnerResults> ev = Run(e);
  ASSERT_TRUE(ev.ok()) << ev.status();
  ASSERT_EQ(ev->measurements.size(), 2u);
  const v1::Measurement& m = ev->measurements[0];
  EXPECT_EQ(m.verdict(), v1::VERDICT_TIMEOUT);
  EXPECT_EQ(m.reason(), "timeout");
  EXPECT_LT(ev->seconds, 15);
  EXPECT_GT(m.time_limit_s(), 1);
  EXPECT_LT(m.time_limit_s(), 3);
  EXPECT_TRUE(absl::StrContains(m.time_limit_basis(), "10 us slowest baseline")) << m.time_limit_basis();
  EXPECT_TRUE(absl::StrContains(m.detail(), "the limit:")) << m.detail();
  EXPECT_EQ(ev->measurements[1].verdict(), v1::VERDICT_TIMEOUT);
  EXPECT_TRUE(absl::StrContains(ev->measurements[1].detail(), "not run")) << ev->measurements[1].detail();
  EXPECT_EQ(ev->runner_starts, 1);
}

TEST_F(FakeRunnerTest, AnOutputFloodIsCutAtTheCapAndKilled) {
  RunnerHost e = Make("yes 'device printf flood'");
  absl::StatusOr<RunnerResults> ev = Run(e);
  ASSERT_TRUE(ev.ok()) << ev.status();
  ASSERT_EQ(ev->measurements.size(), 2u);
  const v1::Measurement& m = ev->measurements[0];
  EXPECT_EQ(m.verdict(), v1::VERDICT_CRASHED);
  EXPECT_EQ(m.reason(), "output_flood");
  EXPECT_EQ(m.output_cap_bytes(), 1 << 20);
  EXPECT_LT(ev->seconds, 10);
  EXPECT_TRUE(absl::StrContains(ev->measurements[1].detail(), "not run"));
}

}  // namespace
}  // namespace anvil
