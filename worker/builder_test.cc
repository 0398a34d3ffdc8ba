// Builder against the real nvcc (no GPU needed): builds, caches, reports
// compile errors and refuses what the policy forbids; unity builds give each
// configuration its own working shared object and fall back on failure.
#include "worker/builder.h"

#include <dlfcn.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include <gtest/gtest.h>

#include "absl/strings/str_join.h"
#include "proto/candidate.h"
#include "sandbox/sandbox.h"
#include "tests/naive_kernel.h"

namespace anvil {
namespace {

using testing::kNaiveKernel;

// A small family for unity builds. Its knob ANVIL_TILE sizes a shared array
// (so ptxas reports 4 * TILE bytes of shared memory for `fill`) and comes back
// from anvil_workspace_bytes (so each shared object says which configuration
// it runs); more than 64 fails a static_assert.
constexpr char kTileFamily[] = R"(
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#ifndef ANVIL_TILE
#define ANVIL_TILE 8
#endif
static_assert(ANVIL_TILE <= 64, "ANVIL_TILE must be at most 64");
namespace {
__global__ void fill(__half* c, int n) {
  __shared__ float lane[ANVIL_TILE];
  lane[threadIdx.x] = threadIdx.x;
  __syncthreads();
  const int i = blockIdx.x * ANVIL_TILE + threadIdx.x;
  if (i < n) c[i] = __float2half(lane[(threadIdx.x + 1) % ANVIL_TILE]);
}
}  // namespace
__global__ void tile_probe(int* out) { *out = ANVIL_TILE; }
extern "C" size_t anvil_workspace_bytes(int M, int N, int K) { return 1000 * ANVIL_TILE + (M + N + K > 0); }
extern "C" int anvil_gemm(const __half*, const __half*, __half* C, int M, int N, int, void*, cudaStream_t s) {
  fill<<<(M * N + ANVIL_TILE - 1) / ANVIL_TILE, ANVIL_TILE, 0, s>>>(C, M * N);
  return cudaGetLastError() != cudaSuccess;
}
)";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// How the build cache says an artifact was built (build.log beside it).
std::string BuildLog(const v1::Build& b) {
  return ReadFile(std::filesystem::path(b.artifact()).parent_path().string() + "/build.log");
}

// Loads a built candidate as the runner does and calls anvil_workspace_bytes(1, 1, 1);
// -1 when it cannot be loaded or lacks an ABI function.
int64_t WorkspaceOf(const std::string& so, const std::string& cuda_root) {
  for (const char* lib : {"/lib64/libcudart.so", "/lib/libcudart.so"}) {
    if (dlopen((cuda_root + lib).c_str(), RTLD_NOW | RTLD_GLOBAL) != nullptr) break;
  }
  void* h = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    ADD_FAILURE() << dlerror();
    return -1;
  }
  auto ws = reinterpret_cast<size_t (*)(int, int, int)>(dlsym(h, "anvil_workspace_bytes"));
  if (ws == nullptr || dlsym(h, "anvil_gemm") == nullptr) return -1;
  return static_cast<int64_t>(ws(1, 1, 1));  // stays loaded, as in the runner
}

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
    options_ = o;
    builder_.emplace(o);
  }
  Builder With(int jobs, int unity) const {
    BuilderOptions o = options_;
    o.jobs = jobs;
    o.unity = unity;
    return Builder(o);
  }
  v1::Candidate Tile(int tile) {
    v1::Candidate c;
    c.set_source(kTileFamily);
    c.set_layout(v1::LAYOUT_NT);
    c.set_arch("sm_90");
    (*c.mutable_params())["TILE"] = std::to_string(tile);
    AssignCandidateId(c);
    return c;
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
  BuilderOptions options_;
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

TEST_F(BuilderTest, UnityGroupGivesEachConfigurationItsOwnLibrary) {
  const Builder unity = With(/*jobs=*/1, /*unity=*/8);
  const std::vector<v1::Candidate> cs = {Tile(8), Tile(16), Tile(32)};
  std::mutex mu;
  std::vector<size_t> told;
  std::vector<absl::StatusOr<v1::Build>> r =
      unity.BuildAll(cs, nullptr, [&](size_t i, const absl::StatusOr<v1::Build>& b) {
        std::lock_guard<std::mutex> lock(mu);
        told.push_back(i);
        EXPECT_TRUE(b.ok());
      });
  ASSERT_EQ(r.size(), 3u);
  std::sort(told.begin(), told.end());
  EXPECT_EQ(told, (std::vector<size_t>{0, 1, 2})) << "built() once per candidate";
  for (size_t k = 0; k < cs.size(); ++k) {
    const int tile = 8 << k;
    ASSERT_TRUE(r[k].ok()) << r[k].status();
    ASSERT_EQ(r[k]->verdict(), v1::VERDICT_PASSED) << r[k]->error();
    EXPECT_EQ(r[k]->candidate_id(), cs[k].id());
    EXPECT_FALSE(r[k]->cache_hit());
    EXPECT_EQ(r[k]->flags(), absl::StrJoin(*unity.Flags(cs[k]), " ")) << "the flags it would be built with alone";
    EXPECT_GT(r[k]->seconds(), 0);
    EXPECT_NE(BuildLog(*r[k]).find("unity group of 3"), std::string::npos) << BuildLog(*r[k]);
    // Its own configuration behind the ABI names.
    EXPECT_EQ(WorkspaceOf(r[k]->artifact(), options_.toolchain.cuda_root), 1000 * tile + 1);
    // Its own kernels' ptxas report: fill and tile_probe, fill with TILE floats of shared memory.
    ASSERT_EQ(r[k]->usage_size(), 2) << r[k]->DebugString();
    for (const v1::KernelUsage& u : r[k]->usage()) {
      if (u.kernel().find("fill") != std::string::npos) {
        EXPECT_EQ(u.shared_bytes(), 4 * tile) << u.kernel();
      }
    }
  }
  EXPECT_NE(r[0]->artifact(), r[1]->artifact());
  // The keys are those of builds alone: hits now, whichever way they are asked for.
  std::vector<absl::StatusOr<v1::Build>> again = unity.BuildAll(cs);
  const Builder alone = With(/*jobs=*/1, /*unity=*/1);
  for (size_t k = 0; k < cs.size(); ++k) {
    ASSERT_TRUE(again[k].ok());
    EXPECT_TRUE(again[k]->cache_hit());
    EXPECT_EQ(again[k]->artifact(), r[k]->artifact());
    absl::StatusOr<v1::Build> one = alone.Build(cs[k]);
    ASSERT_TRUE(one.ok());
    EXPECT_TRUE(one->cache_hit());
    EXPECT_EQ(one->cache_key(), r[k]->cache_key());
  }
}

TEST_F(BuilderTest, UnityGroupFallsBackToBuildsAloneWhenItsCompileFails) {
  const Builder unity = With(/*jobs=*/1, /*unity=*/8);
  const std::vector<v1::Candidate> cs = {Tile(8), Tile(128), Tile(16)};
  std::vector<absl::StatusOr<v1::Build>> r = unity.BuildAll(cs);
  ASSERT_EQ(r.size(), 3u);
  for (size_t k : {0, 2}) {
    ASSERT_TRUE(r[k].ok()) << r[k].status();
    ASSERT_EQ(r[k]->verdict(), v1::VERDICT_PASSED) << r[k]->error();
    EXPECT_EQ(r[k]->candidate_id(), cs[k].id());
    const std::string log = BuildLog(*r[k]);
    EXPECT_NE(log.find("compiled alone"), std::string::npos) << log;
    EXPECT_NE(log.find("unity compile failed"), std::string::npos) << log;
    EXPECT_EQ(WorkspaceOf(r[k]->artifact(), options_.toolchain.cuda_root), 1000 * (k == 0 ? 8 : 16) + 1);
  }
  ASSERT_TRUE(r[1].ok()) << r[1].status();
  EXPECT_EQ(r[1]->verdict(), v1::VERDICT_COMPILE_ERROR);
  EXPECT_EQ(r[1]->candidate_id(), cs[1].id());
  EXPECT_NE(r[1]->error().find("ANVIL_TILE must be at most 64"), std::string::npos) << r[1]->error();
  EXPECT_NE(r[1]->error().find("candidate.cu("), std::string::npos) << "its own error, as alone: " << r[1]->error();
  EXPECT_EQ(r[1]->error().find("anvil_unity"), std::string::npos) << r[1]->error();
}

// A global-scope name the source shares with a header behaves differently in a
// configuration's namespace (it hides the header's instead of overloading or
// clashing with it): such a group falls back, and each gets its verdict alone.
TEST_F(BuilderTest, UnityGroupFallsBackWhenTheSourceReusesAHeadersGlobalName) {
  const Builder unity = With(/*jobs=*/1, /*unity=*/8);
  auto with = [&](const std::string& global, int tile) {
    v1::Candidate c = Tile(tile);
    c.set_source(std::string(kTileFamily) + global);
    AssignCandidateId(c);
    return c;
  };
  // An overload of CUDA's ::max: fine alone. A second dim3: an error alone.
  const std::string overload = "__host__ __device__ inline int max(int a, int b, int c) { return a + b + c; }\n";
  const std::string clash = "struct dim3 { int x; };\n";
  std::vector<absl::StatusOr<v1::Build>> r =
      unity.BuildAll({with(overload, 8), with(overload, 16), with(clash, 8), with(clash, 16)});
  for (size_t k = 0; k < r.size(); ++k) {
    ASSERT_TRUE(r[k].ok()) << r[k].status();
    if (k < 2) {
      ASSERT_EQ(r[k]->verdict(), v1::VERDICT_PASSED) << r[k]->error();
      EXPECT_NE(BuildLog(*r[k]).find("unity compile failed"), std::string::npos) << BuildLog(*r[k]);
    } else {
      EXPECT_EQ(r[k]->verdict(), v1::VERDICT_COMPILE_ERROR);
      EXPECT_NE(r[k]->error().find("dim3"), std::string::npos) << r[k]->error();
    }
  }
}

TEST_F(BuilderTest, BuildAllCancelledBeforeStartingBuildsNothing) {
  const Builder unity = With(/*jobs=*/2, /*unity=*/8);
  std::vector<absl::StatusOr<v1::Build>> r =
      unity.BuildAll({Tile(8), Tile(16), Tile(24), Make(kNaiveKernel)}, [] { return true; });
  for (const absl::StatusOr<v1::Build>& b : r) EXPECT_TRUE(absl::IsCancelled(b.status())) << b.status();
}

}  // namespace
}  // namespace anvil
