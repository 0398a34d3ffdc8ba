// Compile bombs through a real nvcc, run the way the builder runs it: each
// must end within its limits with a clear outcome (timed out, killed, out of
// memory, output truncated). Skips without nvcc. Slow (about a minute), so it
// is its own test target, sandbox_bomb_test.
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <fstream>
#include <iostream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "sandbox/test_util.h"

namespace anvil::sandbox {
namespace {

constexpr char kDeepTemplates[] = R"(
template <class A, class B> struct P {};
template <int N, class T> struct Blow {
  static constexpr int v = Blow<N - 1, P<T, int>>::v + Blow<N - 1, P<int, T>>::v;
};
template <class T> struct Blow<0, T> { static constexpr int v = 1; };
__global__ void k(int* o) { o[0] = Blow<40, int>::v; }
)";

constexpr char kGiantTable[] = R"(
#define X10(...) __VA_ARGS__, __VA_ARGS__, __VA_ARGS__, __VA_ARGS__, __VA_ARGS__, \
                  __VA_ARGS__, __VA_ARGS__, __VA_ARGS__, __VA_ARGS__, __VA_ARGS__
#define X1M(...) X10(X10(X10(X10(X10(X10(__VA_ARGS__))))))
__device__ constexpr unsigned long long kTable[] = { X10(X10(X1M(0x123456789abcdefull))) };
__global__ void k(unsigned long long* o) { o[threadIdx.x] = kTable[threadIdx.x]; }
)";

// 2^24 #warnings through self-inclusion: megabytes of diagnostics per second.
constexpr char kDiagnosticFlood[] = R"(#if __INCLUDE_LEVEL__ < 24
#include __FILE__
#include __FILE__
#endif
#warning diagnostics flood: this line repeats until the output cap is reached
)";

class BombTest : public ::testing::Test {
 protected:
  void SetUp() override {
    nvcc_ = testing::ToolPath("ANVIL_TEST_NVCC", ANVIL_TEST_NVCC);
    if (nvcc_.empty() || access(nvcc_.c_str(), X_OK) != 0) {
      GTEST_SKIP() << "no nvcc found at build time ('" << nvcc_ << "'): compile bombs not tried";
    }
    char real[PATH_MAX];
    const std::string nvcc = realpath(nvcc_.c_str(), real) != nullptr ? real : nvcc_;
    cuda_root_ = nvcc.substr(0, nvcc.rfind('/', nvcc.rfind('/') - 1));  // strip /bin/nvcc
  }

  // Compiles source the way the builder does, with the given wall limit.
  Result Compile(const std::string& source, absl::Duration wall) {
    std::ofstream(dir_.path() + "/candidate.cu") << source;
    Spec s;
    s.argv = {nvcc_, "-arch=sm_90a", "-c", "-o", "candidate.o", "candidate.cu"};
    s.env = {absl::StrCat("PATH=", cuda_root_, "/bin:/usr/bin:/bin"), "HOME=" + dir_.path(),
             "TMPDIR=" + dir_.path(), "LC_ALL=C"};
    s.work_dir = dir_.path();
    s.binds.push_back({cuda_root_, "", false});
    s.limits.wall_time = wall;
    s.limits.kill_grace = absl::Seconds(2);
    s.limits.address_space_bytes = int64_t(4) << 30;
    s.limits.file_size_bytes = int64_t(1) << 30;
    s.limits.output_cap_bytes = 256 << 10;
    absl::StatusOr<Result> r = sandbox::Run(s);
    EXPECT_TRUE(r.ok()) << r.status();
    const Result result = r.ok() ? *r : Result();
    std::string last = result.stderr_text.substr(0, result.stderr_text.find_last_not_of('\n') + 1);
    last = last.substr(last.rfind('\n') + 1).substr(0, 160);
    std::cerr << "  outcome: " << result.Describe() << "; last stderr line: " << last << "\n";
    EXPECT_LT(result.wall_seconds, absl::ToDoubleSeconds(wall) + 2 + 5) << "ended within limits";
    return result;
  }

  static bool Failed(const Result& r) { return r.timed_out || r.term_signal != 0 || r.exit_code != 0; }

  std::string nvcc_, cuda_root_;
  ScratchDir dir_ = testing::MakeScratch("anvil-bomb-");
};

TEST_F(BombTest, AnOrdinaryKernelCompiles) {
  Result r = Compile("__global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }\n", absl::Seconds(60));
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(access((dir_.path() + "/candidate.o").c_str(), F_OK), 0);
}

TEST_F(BombTest, IncludeDevZeroIsStoppedByTheAddressSpaceLimit) {
  Result r = Compile("#include \"/dev/zero\"\n", absl::Seconds(30));
  EXPECT_TRUE(Failed(r));
  EXPECT_TRUE(r.timed_out || r.term_signal != 0 || absl::StrContains(r.stderr_text, "memory") ||
              absl::StrContains(r.stderr_text, "No such file"))
      << r.stderr_text.substr(0, 2000);
}

TEST_F(BombTest, IncludeDevRandomEndsWithinItsLimits) {
  Result r = Compile("#include \"/dev/random\"\n", absl::Seconds(20));
  EXPECT_TRUE(Failed(r)) << r.stderr_text.substr(0, 2000);
}

TEST_F(BombTest, ExponentialTemplateInstantiationIsStopped) {
  Result r = Compile(kDeepTemplates, absl::Seconds(15));
  EXPECT_TRUE(Failed(r));
  EXPECT_TRUE(r.timed_out || r.term_signal != 0 || absl::StrContains(r.stderr_text, "memory"))
      << r.Describe() << "\n" << r.stderr_text.substr(0, 2000);
}

TEST_F(BombTest, GiantConstexprTableIsStopped) {
  Result r = Compile(kGiantTable, absl::Seconds(30));
  EXPECT_TRUE(Failed(r)) << r.stderr_text.substr(0, 2000);
}

TEST_F(BombTest, DiagnosticFloodIsTruncated) {
  Result r = Compile(kDiagnosticFlood, absl::Seconds(8));
  EXPECT_TRUE(r.stderr_truncated || r.stdout_truncated) << r.Describe();
  EXPECT_LE(r.stderr_text.size(), 256u << 10);
  EXPECT_TRUE(Failed(r));
}

}  // namespace
}  // namespace anvil::sandbox
