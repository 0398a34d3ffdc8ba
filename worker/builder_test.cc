// Builder against the real nvcc (no GPU needed): builds, caches, reports
// compile errors and refuses what the policy forbids.
#include "worker/builder.h"

#include <filesystem>

#include <gtest/gtest.h>

#include "proto/candidate.h"
#include "sandbox/sandbox.h"
#include "tests/naive_kernel.h"

namespace anvil {
namespace {

using testing::kNaiveKernel;

class BuilderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<Toolchain> t = Toolchain::Find();
    if (!t.ok()) GTEST_SKIP() << "no nvcc here: " << t.status();
    absl::StatusOr<sandbox::ScratchDir> dir = sandbox::ScratchDir::Create("/tmp", "builder-test-");
    ASSERT_TRUE(dir.ok());
    dir_.emplace(std::move(*dir));
    BuilderOptions o;
    o.toolchain = *t;
    o.cache_dir = dir_->path() + "/cache";
    o.scratch_dir = dir_->path();
    // These tests are about builds, not isolation: they run where the node
    // refuses namespaces too (sandbox_test covers isolation).
    o.isolation = sandbox::Isolation::kAuto;
    builder_.emplace(o);
  }
  v1::Candidate Make(std::string source, std::string scale = "1") {
    v1::Candidate c;
    c.set_source(std::move(source));
    c.set_layout(v1::LAYOUT_NT);
    c.set_arch("sm_90");
    (*c.mutable_params())["SCALE"] = scale;
    AssignCandidateId(c);
    return c;
  }
  std::optional<sandbox::ScratchDir> dir_;
  std::optional<Builder> builder_;
};

TEST_F(BuilderTest, BuildsReportsUsageAndCaches) {
  absl::StatusOr<v1::Build> b = builder_->Build(Make(kNaiveKernel));
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_EQ(b->verdict(), v1::VERDICT_PASSED) << b->error();
  EXPECT_FALSE(b->cache_hit());
  EXPECT_TRUE(std::filesystem::exists(b->artifact()));
  ASSERT_GE(b->usage_size(), 1);
  EXPECT_GT(b->usage(0).registers(), 0);
  EXPECT_NE(b->flags().find("-DANVIL_SCALE=1"), std::string::npos);
  EXPECT_NE(b->flags().find("-DANVIL_LAYOUT_NT=1"), std::string::npos);
  absl::StatusOr<v1::Build> again = builder_->Build(Make(kNaiveKernel + std::string("   \n")));
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->cache_hit());
  EXPECT_EQ(again->artifact(), b->artifact());
}

TEST_F(BuilderTest, CompileErrorsComeBackTrimmed) {
  absl::StatusOr<v1::Build> b = builder_->Build(Make(std::string(kNaiveKernel) + "\nint broken = undefined_name;\n"));
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->verdict(), v1::VERDICT_COMPILE_ERROR);
  EXPECT_NE(b->error().find("candidate.cu("), std::string::npos) << b->error();
  EXPECT_NE(b->error().find("undefined_name"), std::string::npos) << b->error();
  EXPECT_EQ(b->error().find(dir_->path()), std::string::npos) << "scratch path leaked";
}

TEST_F(BuilderTest, RefusesForbiddenFlagsParamsAndSources) {
  v1::Candidate c = Make(kNaiveKernel);
  c.set_flags("-Xcompiler -fplugin=/tmp/evil.so");
  EXPECT_EQ(builder_->Build(c)->verdict(), v1::VERDICT_REJECTED);
  v1::Candidate p = Make(kNaiveKernel, "1 -o /etc/passwd");
  EXPECT_EQ(builder_->Build(p)->verdict(), v1::VERDICT_REJECTED);
  v1::Candidate s = Make(std::string("#include <sys/socket.h>\n") + kNaiveKernel);
  absl::StatusOr<v1::Build> b = builder_->Build(s);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->verdict(), v1::VERDICT_REJECTED);
  EXPECT_NE(b->error().find("sys/socket.h"), std::string::npos) << b->error();
  EXPECT_NE(b->error().find("line 1"), std::string::npos) << b->error();
  EXPECT_EQ(b->candidate_id(), s.id()) << "a refused build must name its candidate to be stored";
}

TEST_F(BuilderTest, BuildAllAnswersInOrder) {
  std::vector<v1::Candidate> cs = {Make(kNaiveKernel, "2"), Make("this is not C++"), Make(kNaiveKernel, "3")};
  std::vector<absl::StatusOr<v1::Build>> r = builder_->BuildAll(cs);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0]->verdict(), v1::VERDICT_PASSED);
  EXPECT_EQ(r[1]->verdict(), v1::VERDICT_COMPILE_ERROR);
  EXPECT_EQ(r[2]->verdict(), v1::VERDICT_PASSED);
  EXPECT_NE(r[0]->artifact(), r[2]->artifact());
}

}  // namespace
}  // namespace anvil
