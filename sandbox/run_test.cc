// Run: outcomes, output capture, environment, descriptors, process cleanup,
// fallbacks and many short jobs. Each test runs with kNone and with kAuto
// (namespaces where the node allows them).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <thread>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "sandbox/internal.h"
#include "sandbox/test_util.h"

namespace anvil::sandbox {
namespace {

using testing::ShellSpec;

class RunTest : public ::testing::TestWithParam<Isolation> {
 protected:
  ScratchDir dir_ = testing::MakeScratch();
  Spec Shell(const std::string& script) { return ShellSpec(dir_.path(), script, GetParam()); }
};

TEST_P(RunTest, CapturesExitCodeAndBothStreams) {
  absl::StatusOr<Result> r = sandbox::Run(Shell("echo out; echo err >&2; exit 3"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->term_signal, 0);
  EXPECT_EQ(r->stdout_text, "out\n");
  EXPECT_EQ(r->stderr_text, "err\n");
  EXPECT_FALSE(r->timed_out);
  EXPECT_TRUE(absl::StartsWith(r->Describe(), "exit 3 in ")) << r->Describe();
  EXPECT_GT(r->wall_seconds, 0);
  for (const char* p : {"process_group", "rlimits", "env_scrubbed", "fds_closed"}) {
    EXPECT_NE(std::find(r->protections.begin(), r->protections.end(), p), r->protections.end()) << p;
  }
}

TEST_P(RunTest, ReportsTheKillingSignal) {
  absl::StatusOr<Result> r = sandbox::Run(Shell("kill -SEGV $$"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->term_signal, SIGSEGV);
  EXPECT_TRUE(absl::StartsWith(r->Describe(), "killed by SIGSEGV")) << r->Describe();
}

TEST_P(RunTest, FeedsStdin) {
  Spec s = Shell("exec cat");
  s.stdin_data = std::string(3 << 20, 'x');  // larger than a pipe
  s.limits.output_cap_bytes = 4 << 20;
  absl::StatusOr<Result> r = sandbox::Run(s);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stdout_text.size(), s.stdin_data.size());
  EXPECT_EQ(r->exit_code, 0);
}

TEST_P(RunTest, SurvivesAChildThatIgnoresStdin) {
  Spec s = Shell("exit 0");
  s.stdin_data = std::string(3 << 20, 'x');  // nobody reads it: EPIPE, not SIGPIPE
  absl::StatusOr<Result> r = sandbox::Run(s);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 0);
}

TEST_P(RunTest, CapsAFloodOnBothStreamsWithoutDeadlock) {
  Spec s = Shell("head -c 30000000 /dev/zero >&2 & head -c 30000000 /dev/zero; wait");
  s.limits.output_cap_bytes = 64 << 10;
  absl::StatusOr<Result> r = sandbox::Run(s);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_EQ(r->stdout_text.size(), 64u << 10);
  EXPECT_EQ(r->stderr_text.size(), 64u << 10);
  EXPECT_TRUE(r->stdout_truncated && r->stderr_truncated);
  EXPECT_TRUE(absl::StrContains(r->Describe(), "stdout truncated")) << r->Describe();
}

TEST_P(RunTest, ScrubsTheEnvironment) {
  setenv("ANVIL_TEST_SECRET", "leak", 1);
  setenv("ANVIL_TEST_PASSED", "through", 1);
  Spec s = Shell("");
  s.argv = {"/usr/bin/env"};  // not through sh, which adds PWD
  s.env = {"ONLY=this"};
  s.env_passthrough = {"ANVIL_TEST_PASSED", "ANVIL_TEST_UNSET_VAR"};
  absl::StatusOr<Result> r = sandbox::Run(s);
  ASSERT_TRUE(r.ok()) << r.status();
  std::vector<std::string> lines;
  for (absl::string_view l : absl::StrSplit(r->stdout_text, '\n', absl::SkipEmpty())) {
    // bwrap sets PWD (= work_dir) when it changes directory: the one addition.
    if (!absl::StartsWith(l, "PWD=") || GetParam() == Isolation::kNone) lines.emplace_back(l);
  }
  std::sort(lines.begin(), lines.end());
  EXPECT_EQ(lines, (std::vector<std::string>{"ANVIL_TEST_PASSED=through", "ONLY=this"}))
      << r->stdout_text;
}

TEST_P(RunTest, ClosesInheritedDescriptors) {
  const int leaked = open("/dev/null", O_RDONLY);  // deliberately without O_CLOEXEC
  ASSERT_GE(leaked, 3);
  absl::StatusOr<Result> r = sandbox::Run(testing::HelperSpec(dir_.path(), {"fds"}, GetParam()));
  close(leaked);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stdout_text, "fd=0\nfd=1\nfd=2\n") << r->stderr_text;
}

TEST_P(RunTest, TimeoutKillsTheWholeGroupIncludingTermIgnoringGrandchildren) {
  const std::string token = testing::UniqueSleepArg();
  Spec s = Shell("(trap '' TERM; exec sleep " + token + ") & trap '' TERM; sleep 1000; wait");
  s.limits.wall_time = absl::Milliseconds(500);
  s.limits.kill_grace = absl::Milliseconds(300);
  absl::StatusOr<Result> r = sandbox::Run(s);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->timed_out);
  EXPECT_NE(r->term_signal, 0);
  EXPECT_LT(r->wall_seconds, 5);
  EXPECT_TRUE(absl::StartsWith(r->Describe(), "timed out after")) << r->Describe();
  EXPECT_EQ(testing::CountProcessesWith(token), 0);
  EXPECT_EQ(testing::CountChildren(), 0);
}

TEST_P(RunTest, OnStdoutBringsTheDeadlineForwardButNeverPastTheWallLimit) {
  // The job announces itself, then hangs: the callback allows 0.5 s from the
  // announcement, well before the 30 s wall limit.
  Spec s = Shell("echo ready; sleep 1000");
  s.limits.wall_time = absl::Seconds(30);
  s.limits.kill_grace = absl::Milliseconds(200);
  int calls = 0;
  s.on_stdout = [&](absl::string_view chunk) -> std::optional<absl::Duration> {
    ++calls;
    if (absl::StrContains(chunk, "ready")) return absl::Milliseconds(500);
    return std::nullopt;
  };
  absl::StatusOr<Result> r = sandbox::Run(s);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GE(calls, 1);
  EXPECT_TRUE(r->timed_out);
  EXPECT_LT(r->wall_seconds, 10);
  EXPECT_LT(r->time_limit_seconds, 10);
  EXPECT_TRUE(absl::StrContains(r->Describe(), "(limit ")) << r->Describe();

  // A job asking for more than the wall limit gets the wall limit.
  Spec greedy = Shell("echo more; sleep 1000");
  greedy.limits.wall_time = absl::Milliseconds(700);
  greedy.limits.kill_grace = absl::Milliseconds(200);
  greedy.on_stdout = [](absl::string_view) -> std::optional<absl::Duration> { return absl::Hours(1); };
  r = sandbox::Run(greedy);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->timed_out);
  EXPECT_LT(r->wall_seconds, 10);
  EXPECT_NEAR(r->time_limit_seconds, 0.7, 0.05);
}

TEST_P(RunTest, KillAtOutputCapEndsAFloodAtOnce) {
  Spec s = Shell("yes flood; sleep 1000");
  s.limits.wall_time = absl::Seconds(30);
  s.limits.output_cap_bytes = 64 * 1024;
  s.limits.kill_at_output_cap = true;
  absl::StatusOr<Result> r = sandbox::Run(s);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->output_capped);
  EXPECT_TRUE(r->stdout_truncated);
  EXPECT_FALSE(r->timed_out);
  EXPECT_LT(r->wall_seconds, 10);
  EXPECT_EQ(r->stdout_text.size(), 64u * 1024);
  EXPECT_TRUE(absl::StrContains(r->Describe(), "output cap")) << r->Describe();
}

// Work no longer wanted (its job was cancelled) ends within the poll period,
// its whole group with it, and says so.
TEST_P(RunTest, CancelledEndsTheJobAtOnce) {
  Spec s = Shell("sleep 30 & sleep 30; echo never");
  s.limits.wall_time = absl::Seconds(60);
  const auto start = std::chrono::steady_clock::now();
  s.cancelled = [start] { return std::chrono::steady_clock::now() - start > std::chrono::milliseconds(300); };
  absl::StatusOr<Result> r = sandbox::Run(s);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->cancelled);
  EXPECT_FALSE(r->timed_out);
  EXPECT_LT(r->wall_seconds, 5);
  EXPECT_EQ(r->stdout_text, "");
  EXPECT_TRUE(absl::StartsWith(r->Describe(), "cancelled after")) << r->Describe();
}

TEST_P(RunTest, KillsWhatTheMainProcessLeavesBehind) {
  const std::string token = testing::UniqueSleepArg();
  absl::StatusOr<Result> r = sandbox::Run(Shell("sleep " + token + " & echo started"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_EQ(testing::CountProcessesWith(token), 0);
}

TEST_P(RunTest, KillsGrandchildrenThatLeftTheProcessGroup) {
  const Capabilities& caps = Probe();
  const bool pid_ns = GetParam() != Isolation::kNone && caps.namespaces;
  if (!pid_ns && !caps.cgroup_kill) {
    GTEST_SKIP() << "neither a pid namespace nor a job cgroup on this node: a process that "
                    "calls setsid() escapes the kill here (" << caps.why_not << ")";
  }
  const std::string token = testing::UniqueSleepArg();
  Spec s = Shell("setsid sh -c 'trap \"\" TERM; exec sleep " + token + "' & sleep 1000");
  s.limits.wall_time = absl::Milliseconds(500);
  s.limits.kill_grace = absl::Milliseconds(200);
  absl::StatusOr<Result> r = sandbox::Run(s);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->timed_out);
  EXPECT_EQ(testing::CountProcessesWith(token), 0);
}

TEST_P(RunTest, ExecFailureIsAResultNotAnError) {
  Spec s = Shell("");
  s.argv = {"/nonexistent/program"};
  absl::StatusOr<Result> r = sandbox::Run(s);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NE(r->exit_code, 0);
  EXPECT_TRUE(absl::StrContains(r->stderr_text, "No such file")) << r->stderr_text;
}

TEST_P(RunTest, ManyThreadsRunJobsAtOnce) {
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 4; ++i) {
        ScratchDir d = testing::MakeScratch();
        absl::StatusOr<Result> r = sandbox::Run(ShellSpec(d.path(), absl::StrCat("echo ", t, "-", i),
                                                 GetParam()));
        if (r.ok() && r->stdout_text == absl::StrCat(t, "-", i, "\n")) ++ok;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(ok.load(), 24);
}

INSTANTIATE_TEST_SUITE_P(Isolation, RunTest,
                         ::testing::Values(Isolation::kNone, Isolation::kAuto),
                         [](const ::testing::TestParamInfo<Isolation>& i) {
                           return i.param == Isolation::kNone ? "None" : "Auto";
                         });

TEST(RunSpecTest, RejectsBadSpecs) {
  ScratchDir dir = testing::MakeScratch();
  Spec s = ShellSpec(dir.path(), "true");
  s.argv = {"sh", "-c", "true"};
  EXPECT_EQ(sandbox::Run(s).status().code(), absl::StatusCode::kInvalidArgument);
  s = ShellSpec(dir.path() + "/missing", "true");
  EXPECT_EQ(sandbox::Run(s).status().code(), absl::StatusCode::kInvalidArgument);
  s = ShellSpec(dir.path(), "true");
  s.binds.push_back({"/nonexistent/path", "", false});
  EXPECT_EQ(sandbox::Run(s).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(RunSpecTest, RootCallersJobMustReachItsWorkDir) {
  if (geteuid() != 0) GTEST_SKIP() << "only a root caller switches the job to another uid";
  ScratchDir parent = testing::MakeScratch("anvil-private-");
  chmod(parent.path().c_str(), 0700);
  absl::StatusOr<ScratchDir> dir = ScratchDir::Create(parent.path(), "job-");
  ASSERT_TRUE(dir.ok());
  absl::StatusOr<Result> r = sandbox::Run(ShellSpec(dir->path(), "true", Isolation::kNone));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(r.status().message(), "not searchable")) << r.status();
  chmod(parent.path().c_str(), 0711);
  r = sandbox::Run(ShellSpec(dir->path(), "id -u; touch made-by-job", Isolation::kNone));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stdout_text, "65534\n");
  EXPECT_EQ(access((dir->path() + "/made-by-job").c_str(), F_OK), 0) << r->stderr_text;
}

TEST(RunFallbackTest, AutoFallsBackAndSaysWhyWhenNamespacesAreRefused) {
  internal::ProbeOptions options;
  options.bwrap_path = "/nonexistent/bwrap";
  const Capabilities caps = internal::ProbeUncached(options);
  EXPECT_FALSE(caps.namespaces);
  EXPECT_TRUE(absl::StrContains(caps.why_not, "namespaces")) << caps.why_not;
  ScratchDir dir = testing::MakeScratch();
  absl::StatusOr<Result> r = internal::RunWith(ShellSpec(dir.path(), "echo hi"), caps);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stdout_text, "hi\n");
  EXPECT_FALSE(r->isolation_fallback.empty());
  EXPECT_EQ(std::find(r->protections.begin(), r->protections.end(), "user_ns"),
            r->protections.end());
  Spec strict = ShellSpec(dir.path(), "echo hi", Isolation::kNamespaces);
  EXPECT_EQ(internal::RunWith(strict, caps).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace anvil::sandbox
