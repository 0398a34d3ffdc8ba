// Limits: rlimits (file size, cpu, processes, open files, address space),
// cgroup memory, and no leaked processes, descriptors, cgroups or scratch
// directories after many short jobs.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "sandbox/test_util.h"

namespace anvil::sandbox {
namespace {

using testing::HelperSpec;
using testing::ShellSpec;

class LimitsTest : public ::testing::TestWithParam<Isolation> {
 protected:
  ScratchDir dir_ = testing::MakeScratch();
};

TEST_P(LimitsTest, FileSizeLimitRaisesSigxfsz) {
  Spec s = ShellSpec(dir_.path(), "", GetParam());
  s.argv = {"/bin/dd", "if=/dev/zero", "of=big", "bs=1M", "count=4"};
  s.limits.file_size_bytes = 1 << 20;
  absl::StatusOr<Result> r = sandbox::Run(s);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->term_signal, SIGXFSZ) << r->Describe() << " " << r->stderr_text;
}

TEST_P(LimitsTest, CpuLimitStopsASpinningJob) {
  Spec s = ShellSpec(dir_.path(), "while :; do :; done", GetParam());
  s.limits.cpu_seconds = 1;
  s.limits.wall_time = absl::Seconds(20);
  absl::StatusOr<Result> r = sandbox::Run(s);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->timed_out) << r->Describe();
  EXPECT_TRUE(r->term_signal == SIGXCPU || r->term_signal == SIGKILL) << r->Describe();
  if (r->usage_known) {
    EXPECT_GE(r->cpu_seconds, 0.9);
  } else {
    EXPECT_EQ(GetParam(), Isolation::kAuto) << "usage is only unknown under namespaces";
    EXPECT_EQ(r->cpu_seconds, 0);
  }
}

TEST_P(LimitsTest, ProcessLimitRefusesForks) {
  Spec s = HelperSpec(dir_.path(), {"fork-many", "64"}, GetParam());
  s.limits.processes = 8;
  absl::StatusOr<Result> r = sandbox::Run(s);
  ASSERT_TRUE(r.ok()) << r.status();
  if (r->exit_code == 127 || absl::StrContains(r->stderr_text, "Resource temporarily")) {
    SUCCEED() << "the uid already had 8 processes: even exec was refused";
    return;
  }
  std::map<std::string, std::string> kv = testing::ParseKv(r->stdout_text);
  ASSERT_TRUE(kv.count("forks")) << r->Describe() << r->stderr_text;
  EXPECT_LT(std::stoi(kv["forks"]), 8);
  EXPECT_EQ(kv["fork_error"], "EAGAIN");
  EXPECT_NE(std::find(r->protections.begin(), r->protections.end(), "rlimit_nproc"),
            r->protections.end());
}

TEST_P(LimitsTest, OpenFilesLimitRefusesOpens) {
  Spec s = HelperSpec(dir_.path(), {"open-many", "100"}, GetParam());
  s.limits.open_files = 16;
  absl::StatusOr<Result> r = sandbox::Run(s);
  ASSERT_TRUE(r.ok()) << r.status();
  std::map<std::string, std::string> kv = testing::ParseKv(r->stdout_text);
  ASSERT_TRUE(kv.count("opens")) << r->Describe() << r->stderr_text;
  EXPECT_LE(std::stoi(kv["opens"]), 13);
  EXPECT_EQ(kv["open_error"], "EMFILE");
}

TEST_P(LimitsTest, AddressSpaceLimitStopsAnAllocation) {
  // tail keeps a whole "line" of /dev/zero (which has no newline) in memory.
  Spec s = ShellSpec(dir_.path(), "exec tail -n 1 /dev/zero", GetParam());
  s.limits.address_space_bytes = int64_t(256) << 20;
  s.limits.wall_time = absl::Seconds(20);
  absl::StatusOr<Result> r = sandbox::Run(s);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->timed_out);
  EXPECT_TRUE(r->exit_code != 0 || r->term_signal != 0) << r->Describe();
}

TEST_P(LimitsTest, CgroupMemoryLimitKillsAndIsReported) {
  if (!Probe().cgroups) {
    GTEST_SKIP() << "cgroup v2 memory controller not available to us: " << Probe().why_not;
  }
  Spec s = ShellSpec(dir_.path(), "exec tail -n 1 /dev/zero", GetParam());
  s.limits.memory_max_bytes = int64_t(64) << 20;
  absl::StatusOr<Result> r = sandbox::Run(s);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->oom_killed) << r->Describe();
  EXPECT_TRUE(absl::StrContains(r->Describe(), "out of memory"));
}

TEST_P(LimitsTest, NoLeaksAfter200ShortJobs) {
  const int fds_before = testing::CountEntries("/proc/self/fd");
  ScratchDir parent = testing::MakeScratch("anvil-leak-test-");
  const std::string token = testing::UniqueSleepArg();
  int ok = 0;
  for (int i = 0; i < 200; ++i) {
    absl::StatusOr<ScratchDir> d = ScratchDir::Create(parent.path(), "job-");
    ASSERT_TRUE(d.ok()) << d.status();
    // Every fourth job leaves a background process behind.
    const std::string script = i % 4 == 0 ? "sleep " + token + " & echo x > out" : "echo x > out";
    absl::StatusOr<Result> r = sandbox::Run(ShellSpec(d->path(), script, GetParam()));
    if (r.ok() && r->exit_code == 0) ++ok;
  }
  EXPECT_EQ(ok, 200);
  EXPECT_EQ(testing::CountEntries(parent.path()), 0);
  EXPECT_EQ(testing::CountProcessesWith(token), 0);
  EXPECT_EQ(testing::CountChildren(), 0);
  EXPECT_EQ(testing::CountEntries("/proc/self/fd"), fds_before);
  if (Probe().cgroup_kill) {
    int left = 0;
    const std::string prefix = absl::StrCat("anvil-", getpid(), "-");
    for (const auto& e : std::filesystem::directory_iterator(Probe().cgroup_parent)) {
      if (absl::StartsWith(e.path().filename().string(), prefix)) ++left;
    }
    EXPECT_EQ(left, 0) << "job cgroups left under " << Probe().cgroup_parent;
  }
}

INSTANTIATE_TEST_SUITE_P(Isolation, LimitsTest,
                         ::testing::Values(Isolation::kNone, Isolation::kAuto),
                         [](const ::testing::TestParamInfo<Isolation>& i) {
                           return i.param == Isolation::kNone ? "None" : "Auto";
                         });

}  // namespace
}  // namespace anvil::sandbox
