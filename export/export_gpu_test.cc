// On a GPU: a package exported for this very device (its name, arch, driver,
// CUDA and cuBLAS versions as the figures' validators) builds, and its example
// checks every exported kernel and the vendor shapes against cuBLAS on random
// and exact 0/1 inputs, eagerly and replayed from a CUDA graph, and that
// dispatch picks what the manifest says.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "export/export.h"
#include "export/export_test_util.h"
#include "node/node_facts.h"

namespace anvil {
namespace {

using testing_util::ReadText;
using testing_util::RegimeMeasurement;
using testing_util::SeedCandidate;
using testing_util::TempDir;
using testing_util::TestProblem;

// This device as the runner names it, and its versions string.
std::pair<std::string, std::string> ThisDevice() {
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  return {node::NormaliseGpuName(prop.name), node::MeasurementVersions(node::ReadVersions())};
}

// The tools the package build uses: the node's (bundle environment) first.
std::string Tool(const char* env, const std::string& built_with, const char* name) {
  if (const char* v = std::getenv(env)) return v;
  if (std::filesystem::exists(built_with)) return built_with;
  return name;  // from PATH
}

// The package builds with CMake on the machine that links it: a GPU node
// without CMake cannot run these tests (the bundle does not carry CMake).
bool HaveCmake() {
  const std::string cmake = Tool("ANVIL_TEST_CMAKE", ANVIL_CMAKE, "cmake");
  return std::system((cmake + " --version > /dev/null 2>&1").c_str()) == 0;
}

// Exports the 01_naive seeds for this device (figures measured with
// `versions`), builds the package and runs its example; returns its output.
std::string ExportBuildAndCheck(const TempDir& dir, const std::string& gpu,
                                const std::string& versions, int* rc) {
  std::unique_ptr<Store> store = *Store::Open(dir.File("anvil.db"));
  const v1::Candidate nt = SeedCandidate("01_naive", v1::LAYOUT_NT, {{"BLOCK", "16"}});
  const v1::Candidate nn = SeedCandidate("01_naive", v1::LAYOUT_NN, {{"BLOCK", "8"}});
  EXPECT_TRUE(store->PutCandidate(nt).ok() && store->PutCandidate(nn).ok());
  struct Win { const v1::Candidate* c; v1::Problem p; double speedup; };
  const Win wins[] = {{&nt, TestProblem(256, 128, 64, v1::LAYOUT_NT, gpu), 1.2},
                      {&nt, TestProblem(77, 300, 129, v1::LAYOUT_NT, gpu), 1.2},
                      {&nn, TestProblem(128, 96, 64, v1::LAYOUT_NN, gpu), 1.2},
                      {&nn, TestProblem(200, 64, 40, v1::LAYOUT_NN, gpu), 1.0}};  // no win: cuBLAS
  for (const Win& w : wins) {
    for (int i = 0; i < 3; ++i) {
      EXPECT_TRUE(store->PutMeasurement(RegimeMeasurement(*w.c, w.p, 10, 20, 10 * w.speedup,
                                                          20 * w.speedup, 1000 + i, versions)).ok());
    }
  }
  ExportOptions o;
  o.gpu = gpu;
  o.out_dir = dir.File("pkg");
  absl::StatusOr<ExportReport> r = ExportLibrary(*store, o);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return "";
  EXPECT_EQ(r->kernels, 3);
  const std::string build = dir.File("build"), log = dir.File("build.log");
  const std::string cmake = Tool("ANVIL_TEST_CMAKE", ANVIL_CMAKE, "cmake");
  const std::string nvcc = Tool("ANVIL_TEST_NVCC", ANVIL_NVCC, "nvcc");
  const std::string cmd = absl::StrCat(cmake, " -S ", o.out_dir, " -B ", build,
                                       " -DCMAKE_CUDA_COMPILER=", nvcc, " > ", log, " 2>&1 && ",
                                       cmake, " --build ", build, " -j4 >> ", log, " 2>&1");
  EXPECT_EQ(std::system(cmd.c_str()), 0) << ReadText(log);
  const std::string out = dir.File("check.txt");
  *rc = std::system((build + "/check_hgemm " + o.out_dir + "/manifest.csv > " + out + " 2>&1").c_str());
  const std::string text = ReadText(out);
  std::printf("%s", text.c_str());
  return text;
}

TEST(ExportGpu, ExampleChecksEveryShapeAgainstCublas) {
  if (!HaveCmake()) GTEST_SKIP() << "no CMake on this node: the exported package cannot be built here";
  TempDir dir;
  const auto [gpu, versions] = ThisDevice();
  int rc = -1;
  const std::string text = ExportBuildAndCheck(dir, gpu, versions, &rc);
  EXPECT_EQ(rc, 0) << text;
  EXPECT_NE(text.find("status: ok"), std::string::npos) << "the validators accept this device";
  EXPECT_NE(text.find("0 of "), std::string::npos);
}

// Figures from another driver: the table is off, one note on stderr, and
// every shape (the kernels' too) goes to cuBLAS and is still right.
TEST(ExportGpu, ValidatorMismatchSendsEverythingToCublas) {
  if (!HaveCmake()) GTEST_SKIP() << "no CMake on this node: the exported package cannot be built here";
  TempDir dir;
  const auto [gpu, versions] = ThisDevice();
  const std::string other = absl::StrReplaceAll(versions, {{" driver=", " driver=1"}});
  int rc = -1;
  const std::string text = ExportBuildAndCheck(dir, gpu, other, &rc);
  EXPECT_EQ(rc, 0) << text;
  EXPECT_NE(text.find("anvil_hgemm: device 0 differs: driver"), std::string::npos) << text;
  EXPECT_EQ(text.find("-> naive_"), std::string::npos) << "no shape reaches a kernel";
}

}  // namespace
}  // namespace anvil
