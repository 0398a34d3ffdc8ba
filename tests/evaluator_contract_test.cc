// The CandidateEvaluator contract (worker/candidate_evaluator.h), one suite
// run against every implementation that can run here: LocalEvaluator (real
// sandboxed nvcc; it measures only where there is a GPU), MeteredEvaluator
// (the /metrics wrapper of `anvil serve`) and the test doubles' base
// (tests/per_shape_evaluator.h, through FakeEvaluator). RemoteEvaluator
// keeps the contract through a fleet, covered end to end by tests/fleet/.
#include <unistd.h>

#include <ctime>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "node/node_facts.h"
#include "proto/candidate.h"
#include "server/rpc/metered_evaluator.h"
#include "server/rpc/metrics.h"
#include "tests/coordinator/fakes.h"
#include "tests/naive_kernel.h"
#include "worker/local_evaluator.h"

namespace anvil {
namespace {

// One implementation under test: how to make it, and candidates it builds.
struct Subject {
  std::string name;
  std::function<absl::StatusOr<std::unique_ptr<CandidateEvaluator>>()> make;
  // A candidate that compiles (or not), distinct per tag.
  std::function<v1::Candidate(bool compiles, const std::string& tag)> candidate;
  bool can_measure = true;  // false: no GPU here for a real runner
};

v1::Candidate RealCandidate(bool compiles, const std::string& tag) {
  v1::Candidate c;
  c.set_source(absl::StrCat(compiles ? testing::kNaiveKernel : "this is not CUDA", "\n// ", tag, "\n"));
  c.set_layout(v1::LAYOUT_NT);
  c.set_arch("sm_90a");
  AssignCandidateId(c);
  return c;
}

v1::Candidate FakeOne(bool compiles, const std::string& tag) {
  return testing_fakes::FakeCandidate(v1::LAYOUT_NT, 5, absl::StrCat(tag, compiles ? "good" : "bad"), !compiles);
}

std::vector<Subject> Subjects() {
  std::vector<Subject> s;
  s.push_back({"Fake", [] { return absl::StatusOr<std::unique_ptr<CandidateEvaluator>>(
                               std::make_unique<testing_fakes::FakeEvaluator>(nullptr)); },
               FakeOne});
  s.push_back({"Metered",
               []() -> absl::StatusOr<std::unique_ptr<CandidateEvaluator>> {
                 static rpc::ServerMetrics* metrics =
                     rpc::ServerMetrics::Start("", [] { return rpc::MetricsSnapshot(); })->release();
                 return std::unique_ptr<CandidateEvaluator>(std::make_unique<rpc::MeteredEvaluator>(
                     std::make_unique<testing_fakes::FakeEvaluator>(nullptr), *metrics));
               },
               FakeOne});
  s.push_back({"Local",
               []() -> absl::StatusOr<std::unique_ptr<CandidateEvaluator>> {
                 LocalEvaluatorOptions o;
                 o.cache_dir = std::filesystem::temp_directory_path().string() + "/anvil-contract-cache";
                 o.build_jobs = 2;
                 o.allow_no_isolation = true;  // the contract, not isolation (sandbox_test)
                 absl::StatusOr<std::unique_ptr<LocalEvaluator>> e = LocalEvaluator::Create(o);
                 if (!e.ok()) return e.status();
                 return std::unique_ptr<CandidateEvaluator>(*std::move(e));
               },
               RealCandidate, node::CountGpus() > 0});
  return s;
}

class EvaluatorContractTest : public ::testing::TestWithParam<Subject> {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<CandidateEvaluator>> e = GetParam().make();
    if (!e.ok()) GTEST_SKIP() << GetParam().name << " cannot run here: " << e.status();
    evaluator_ = *std::move(e);
  }
  MeasureRequest Request(const v1::Candidate& c, const v1::Build& b) {
    MeasureRequest r;
    r.candidate = c;
    r.build = b;
    r.shapes = {ParseShape("64x64x64").value(), ParseShape("128x64x32").value()};
    return r;
  }
  std::unique_ptr<CandidateEvaluator> evaluator_;
};

TEST_P(EvaluatorContractTest, BuildAnswersEachCandidateInOrderWithAVerdict) {
  const v1::Candidate good = GetParam().candidate(true, "build"), bad = GetParam().candidate(false, "build");
  std::vector<absl::StatusOr<v1::Build>> got = evaluator_->Build({bad, good}, {});
  ASSERT_EQ(got.size(), 2u);
  for (size_t i = 0; i < got.size(); ++i) ASSERT_TRUE(got[i].ok()) << got[i].status();
  EXPECT_EQ(got[0]->candidate_id(), bad.id());
  EXPECT_NE(got[0]->verdict(), v1::VERDICT_PASSED);  // a failure is data, not an error
  EXPECT_EQ(got[1]->candidate_id(), good.id());
  EXPECT_EQ(got[1]->verdict(), v1::VERDICT_PASSED) << got[1]->error();
  EXPECT_TRUE(evaluator_->Build({}, {}).empty());
}

// Work asked for after the job is cancelled is not done (a build the cache
// holds may still answer: it is no work).
TEST_P(EvaluatorContractTest, CancelledWorkAnswersCancelled) {
  const WorkContext cancelled{"job-contract", [] { return true; }};
  const v1::Candidate fresh = GetParam().candidate(true, absl::StrCat("cancel-", ::getpid(), "-", time(nullptr)));
  std::vector<absl::StatusOr<v1::Build>> built = evaluator_->Build({fresh}, cancelled);
  ASSERT_EQ(built.size(), 1u);
  EXPECT_TRUE(absl::IsCancelled(built[0].status())) << built[0].status();
  v1::Build b;
  b.set_verdict(v1::VERDICT_PASSED);
  std::vector<absl::StatusOr<MeasureResult>> measured =
      evaluator_->Measure({Request(fresh, b)}, cancelled);
  ASSERT_EQ(measured.size(), 1u);
  EXPECT_TRUE(absl::IsCancelled(measured[0].status())) << measured[0].status();
}

TEST_P(EvaluatorContractTest, MeasureAnswersEveryShapeAndLearnsTheDevice) {
  if (!GetParam().can_measure) GTEST_SKIP() << "no GPU here: " << GetParam().name << " measures on one";
  const v1::Candidate c = GetParam().candidate(true, "measure");
  std::vector<absl::StatusOr<v1::Build>> built = evaluator_->Build({c}, {});
  ASSERT_TRUE(built[0].ok()) << built[0].status();
  ASSERT_EQ(built[0]->verdict(), v1::VERDICT_PASSED);
  const MeasureRequest r = Request(c, *built[0]);
  std::vector<absl::StatusOr<MeasureResult>> got = evaluator_->Measure({r}, {"job-contract", nullptr});
  ASSERT_EQ(got.size(), 1u);
  ASSERT_TRUE(got[0].ok()) << got[0].status();
  ASSERT_EQ(got[0]->measurements.size(), r.shapes.size());
  for (size_t i = 0; i < r.shapes.size(); ++i) {
    const v1::Measurement& m = got[0]->measurements[i];
    EXPECT_EQ(m.candidate_id(), c.id());
    EXPECT_NE(m.verdict(), v1::VERDICT_UNSPECIFIED);
    EXPECT_EQ(m.problem().shape().m(), r.shapes[i].m());
    EXPECT_FALSE(m.problem().gpu().empty());
  }
  EXPECT_GE(got[0]->gpu_seconds, 0);
  std::optional<v1::RunnerInfo> device = evaluator_->device();
  ASSERT_TRUE(device.has_value());
  EXPECT_EQ(device->gpu(), got[0]->measurements[0].problem().gpu());
  EXPECT_FALSE(device->arch().empty());
}

TEST_P(EvaluatorContractTest, SlotsAndHooksNeedNoJob) {
  EXPECT_GE(evaluator_->MeasureSlots(), 1);
  evaluator_->JobStarting("job-contract");
  evaluator_->JobStopped("job-contract", /*ended=*/true);
  EXPECT_EQ(evaluator_->Waiting(), "");  // nothing is waiting on a worker here
}

INSTANTIATE_TEST_SUITE_P(Implementations, EvaluatorContractTest, ::testing::ValuesIn(Subjects()),
                         [](const ::testing::TestParamInfo<Subject>& i) { return i.param.name; });

}  // namespace
}  // namespace anvil
