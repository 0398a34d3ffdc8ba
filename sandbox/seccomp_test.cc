// The runner's seccomp filter, tried by sandbox_test_helper; and a hostile
// candidate that slips past the source policy (token pasting) and is stopped
// by the filter and the scrubbed environment instead.
#include <unistd.h>

#include <fstream>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "sandbox/test_util.h"

namespace anvil::sandbox {
namespace {

using testing::HelperSpec;
using testing::ParseKv;

TEST(SeccompTest, RefusesWhatItShouldAndKeepsThreads) {
  ScratchDir dir = testing::MakeScratch();
  absl::StatusOr<Result> r = sandbox::Run(HelperSpec(dir.path(), {"seccomp"}, Isolation::kNone));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->exit_code, 0) << r->Describe() << "\n" << r->stdout_text << r->stderr_text;
  std::map<std::string, std::string> kv = ParseKv(r->stdout_text);
  EXPECT_EQ(kv["install"], "ok");
  for (const char* refused : {"socket", "fork", "execve", "open_write", "open_rdwr", "ptrace",
                              "unlink", "mkdir", "kill_other", "io_uring_setup", "unshare"}) {
    EXPECT_EQ(kv[refused], "EPERM") << refused;
  }
  EXPECT_EQ(kv["clone3"], "ENOSYS") << "so that glibc falls back to clone for threads";
  EXPECT_EQ(kv["open_read"], "ok");
  EXPECT_EQ(kv["kill_self"], "ok");
  EXPECT_EQ(kv["thread"], "ok") << "the CUDA runtime and CUPTI need threads";
  EXPECT_NE(access((dir.path() + "/helper-output").c_str(), F_OK), 0);
}

TEST(SeccompTest, ListsItsRules) {
  std::vector<std::string> rules = RunnerSeccompRules();
  EXPECT_NE(std::find(rules.begin(), rules.end(), "socket: EPERM"), rules.end());
  EXPECT_NE(std::find(rules.begin(), rules.end(), "execve: EPERM"), rules.end());
}

// Passes CheckSource: every forbidden name is assembled by the preprocessor.
constexpr char kHostileSource[] = R"(#include <cstdio>
#define CAT(a, b) a##b
extern "C" {
int CAT(sock, et)(int, int, int);
int CAT(sys, tem)(const char*);
char* CAT(get, env)(const char*);
int* __errno_location();
int anvil_hostile() {
  int s = CAT(sock, et)(2, 1, 0);
  std::printf("hostile_socket=%s\n", s >= 0 ? "ok" : *__errno_location() == 1 ? "EPERM" : "other");
  std::printf("hostile_system=%d\n", CAT(sys, tem)("echo pwned > pwned.txt"));
  std::printf("hostile_fopen=%s\n", CAT(fop, en)("hostile.txt", "w") ? "ok" : "refused");
  const char* secret = CAT(get, env)("ANVIL_TEST_SECRET");
  std::printf("hostile_getenv=%s\n", secret ? secret : "unset");
  return 0;
}
}
)";

TEST(SeccompTest, HostileCodeSlipsPastThePolicyButIsContained) {
  absl::StatusOr<std::vector<PolicyViolation>> v = CheckSource(kHostileSource, SourcePolicy{});
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_TRUE(v->empty()) << "token pasting hides the names from the policy: " << (*v)[0].message;

  const std::string cxx = testing::ToolPath("ANVIL_TEST_CXX", ANVIL_TEST_CXX);
  if (cxx.empty() || access(cxx.c_str(), X_OK) != 0) GTEST_SKIP() << "no C++ compiler: " << cxx;
  ScratchDir dir = testing::MakeScratch();
  std::ofstream(dir.path() + "/hostile.cc") << kHostileSource;
  Spec build = testing::ShellSpec(dir.path(), "");
  build.argv = {cxx, "-shared", "-fPIC", "-o", "hostile.so", "hostile.cc"};
  build.env.push_back("TMPDIR=" + dir.path());
  absl::StatusOr<Result> b = sandbox::Run(build);
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_EQ(b->exit_code, 0) << b->stderr_text;

  setenv("ANVIL_TEST_SECRET", "leak", 1);
  absl::StatusOr<Result> r =
      sandbox::Run(HelperSpec(dir.path(), {"run-candidate", dir.path() + "/hostile.so"}));
  ASSERT_TRUE(r.ok()) << r.status();
  std::map<std::string, std::string> kv = ParseKv(r->stdout_text);
  EXPECT_EQ(kv["install"], "ok") << r->stdout_text << r->stderr_text;
  EXPECT_EQ(kv["hostile_socket"], "EPERM");
  EXPECT_NE(kv["hostile_system"], "0");
  EXPECT_EQ(kv["hostile_fopen"], "refused");
  EXPECT_EQ(kv["hostile_getenv"], "unset");
  EXPECT_NE(access((dir.path() + "/pwned.txt").c_str(), F_OK), 0);
  EXPECT_NE(access((dir.path() + "/hostile.txt").c_str(), F_OK), 0);
}

}  // namespace
}  // namespace anvil::sandbox
