#include "export/export.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "export/export_test_util.h"
#include "absl/strings/str_replace.h"
#include "nlohmann/json.hpp"

namespace anvil {
namespace {

namespace fs = std::filesystem;
using testing_util::ReadText;
using testing_util::RegimeMeasurement;
using testing_util::SeedCandidate;
using testing_util::TempDir;
using testing_util::TestProblem;

constexpr char kGpu[] = "H100-SXM5-80GB";
constexpr char kVersions[] = "cudart=13000 driver=13000 cublas=130100 cublaslt=130100";

// A store with four problems on kGpu and one on another GPU:
//   256x128x64 nt: 01_naive nt wins by 20% hot, 15% cold   -> kernel
//   128x96x64 nn:  01_naive nn wins by 10% in both         -> kernel
//   512x512x512 nt: wins hot only; a tuned cuBLASLt algo   -> cublaslt
//   64x64x64 nt:   1.10x median, one process at 1.00x      -> cublas
class ExportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StoreOptions o;
    o.now_unix_ms = [] { return int64_t(1764000000000); };
    store_ = *Store::Open(dir_.File("anvil.db"), o);
    nt_ = SeedCandidate("01_naive", v1::LAYOUT_NT, {{"BLOCK", "16"}});
    nn_ = SeedCandidate("01_naive", v1::LAYOUT_NN, {{"BLOCK", "8"}});
    ASSERT_TRUE(store_->PutCandidate(nt_).ok());
    ASSERT_TRUE(store_->PutCandidate(nn_).ok());
    Win(nt_, TestProblem(256, 128, 64, v1::LAYOUT_NT, kGpu), {1.20, 1.15});
    Win(nn_, TestProblem(128, 96, 64, v1::LAYOUT_NN, kGpu), {1.10, 1.10});
    Win(nt_, TestProblem(512, 512, 512, v1::LAYOUT_NT, kGpu), {1.10, 1.01});
    Win(nt_, TestProblem(64, 64, 64, v1::LAYOUT_NT, kGpu), {1.10, 1.10}, 1.00);
    Win(nt_, TestProblem(256, 128, 64, v1::LAYOUT_NT, "H200"), {1.2, 1.2});
    ASSERT_TRUE(store_->PutLtAlgo(TestProblem(512, 512, 512, v1::LAYOUT_NT, kGpu), "130100",
                                  LtAlgo{std::string(64, '\x07'), 0, "graph-cold"}).ok());
  }
  // Three verified re-measurements at `speedups` (hot, cold); the last one's
  // cold speedup is `last_cold` when given.
  void Win(const v1::Candidate& c, const v1::Problem& p, std::pair<double, double> speedups,
           double last_cold = 0) {
    for (int i = 0; i < 3; ++i) {
      const double cold = i == 2 && last_cold > 0 ? last_cold : speedups.second;
      ASSERT_TRUE(store_->PutMeasurement(RegimeMeasurement(c, p, 10, 20, 10 * speedups.first,
                                                           20 * cold, 1763900000000 + i, kVersions))
                      .ok());
    }
  }
  ExportOptions Options(const std::string& out) {
    ExportOptions o;
    o.gpu = kGpu;
    o.out_dir = dir_.File(out);
    return o;
  }
  TempDir dir_;
  std::unique_ptr<Store> store_;
  v1::Candidate nt_, nn_;
};

TEST_F(ExportTest, ShipsOnlyKernelsThatClearTheMarginInBothRegimes) {
  absl::StatusOr<ExportReport> r = ExportLibrary(*store_, Options("pkg"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->kernels, 2);
  EXPECT_EQ(r->fallbacks, 2);
  std::map<std::string, std::string> path;
  for (const ExportedShape& s : r->shapes) path[ShapeName(s.spec.shape)] = s.path;
  EXPECT_EQ(path["256x128x64"], "kernel");
  EXPECT_EQ(path["128x96x64"], "kernel");
  EXPECT_EQ(path["512x512x512"], "cublaslt");
  EXPECT_EQ(path["64x64x64"], "cublas");

  nlohmann::json m = nlohmann::json::parse(ReadText(dir_.File("pkg/manifest.json")));
  EXPECT_EQ(m["gpu"], kGpu);
  EXPECT_EQ(m["versions"]["cublas"], 130100);
  EXPECT_EQ(m["versions"]["driver"], 13000);
  EXPECT_EQ(m["date"], "2025-11-23");  // from the measurements, not the clock
  ASSERT_EQ(m["shapes"].size(), 4u);
  const nlohmann::json& first = m["shapes"][0];  // nt shapes first, by M
  EXPECT_EQ(first["m"], 64);
  EXPECT_EQ(first["path"], "cublas");
  EXPECT_NE(first["reason"].get<std::string>().find("cold"), std::string::npos);
  const nlohmann::json& k = m["shapes"][1];
  EXPECT_EQ(k["path"], "kernel");
  EXPECT_EQ(k["candidate_id"], nt_.id());
  EXPECT_EQ(k["source_sha256"], Sha256Hex(nt_.source()));
  EXPECT_NEAR(k["hot"]["speedup"].get<double>(), 1.20, 1e-9);
  EXPECT_NEAR(k["cold"]["speedup_low"].get<double>(), 1.15, 1e-9);
  EXPECT_EQ(k["cold"]["baseline"], "cublaslt_auto");
  EXPECT_EQ(k["cold"]["measurements"], 3);
  const std::string csv = ReadText(dir_.File("pkg/manifest.csv"));
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 5);
  EXPECT_NE(csv.find("256,128,64,nt,kernel," + nt_.name()), std::string::npos) << csv;
}

TEST_F(ExportTest, TableHoldsKernelsAndTunedAlgorithmsOnly) {
  ASSERT_TRUE(ExportLibrary(*store_, Options("pkg")).ok());
  const std::string table = ReadText(dir_.File("pkg/src/anvil_hgemm_table.cc"));
  const std::string nt = "anvil_k_" + nt_.id().substr(0, 8), nn = "anvil_k_" + nn_.id().substr(0, 8);
  const int nt_index = nt < nn ? 0 : 1, nn_index = 1 - nt_index;
  EXPECT_NE(table.find("{1, 256, 128, 64, " + std::to_string(nt_index) + ", -1}"), std::string::npos) << table;
  EXPECT_NE(table.find("{2, 128, 96, 64, " + std::to_string(nn_index) + ", -1}"), std::string::npos);
  EXPECT_NE(table.find("{1, 512, 512, 512, -1, 0}"), std::string::npos);
  EXPECT_EQ(table.find("{1, 64, 64, 64,"), std::string::npos);  // no win, no tuned algo: cuBLAS
  EXPECT_NE(table.find("\"H100-SXM5-80GB\", \"sm_90a\", 13000, 13000, 130100"), std::string::npos);
  EXPECT_NE(table.find("0x07,0x07"), std::string::npos);
  // Each kernel's ABI symbols renamed in its own translation unit.
  const std::string tu = ReadText(dir_.File("pkg/src/kernels/" + nt + ".cu"));
  EXPECT_NE(tu.find("#define anvil_gemm " + nt + "_gemm"), std::string::npos);
  EXPECT_EQ(ReadText(dir_.File("pkg/src/kernels/" + nt + ".source.cuh")), nt_.source());
  EXPECT_NE(ReadText(dir_.File("pkg/kernels.cmake")).find("ANVIL_LAYOUT_NN=1;ANVIL_BLOCK=8"),
            std::string::npos);
}

TEST_F(ExportTest, SameStoreAndArgumentsGiveTheSameBytes) {
  absl::StatusOr<ExportReport> a = ExportLibrary(*store_, Options("a"));
  absl::StatusOr<ExportReport> b = ExportLibrary(*store_, Options("b"));
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->files, b->files);
  for (const std::string& f : a->files) {
    EXPECT_EQ(ReadText(dir_.File("a/" + f)), ReadText(dir_.File("b/" + f))) << f;
  }
  // A previous export is replaced in place.
  ASSERT_TRUE(ExportLibrary(*store_, Options("a")).ok());
  EXPECT_EQ(ReadText(dir_.File("a/manifest.json")), ReadText(dir_.File("b/manifest.json")));
}

TEST_F(ExportTest, BadInputWritesNothing) {
  ExportOptions o = Options("pkg");
  o.gpu = "A100";
  absl::Status st = ExportLibrary(*store_, o).status();
  EXPECT_TRUE(absl::IsInvalidArgument(st));
  EXPECT_NE(st.message().find("H100-SXM5-80GB, H200"), std::string::npos) << st;

  o = Options("pkg");
  o.margin = 0.25;  // nothing wins by 25%
  st = ExportLibrary(*store_, o).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(st)) << st;
  EXPECT_NE(st.message().find("no winners"), std::string::npos) << st;

  o = Options("pkg");
  std::ofstream(dir_.File("bad.txt")) << "256 128 64 nt\n256 x 64 nt\n";
  o.problems_file = dir_.File("bad.txt");
  st = ExportLibrary(*store_, o).status();
  EXPECT_TRUE(absl::IsInvalidArgument(st));
  EXPECT_NE(st.message().find("line 2"), std::string::npos) << st;

  o.problems_file = dir_.File("missing.txt");
  EXPECT_TRUE(absl::IsNotFound(ExportLibrary(*store_, o).status()));
  EXPECT_FALSE(fs::exists(dir_.File("pkg")));

  fs::create_directories(dir_.File("empty"));  // an empty directory is fine
  EXPECT_TRUE(ExportLibrary(*store_, Options("empty")).ok());
  EXPECT_TRUE(fs::exists(dir_.File("empty/manifest.json")));

  fs::create_directories(dir_.File("mine"));
  std::ofstream(dir_.File("mine/notes.txt")) << "keep me\n";
  st = ExportLibrary(*store_, Options("mine")).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(st)) << st;
  EXPECT_EQ(ReadText(dir_.File("mine/notes.txt")), "keep me\n");
  for (const fs::directory_entry& e : fs::directory_iterator(dir_.File(""))) {
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
  }
}

TEST_F(ExportTest, ProblemsFileSelectsShapes) {
  ExportOptions o = Options("pkg");
  std::ofstream(dir_.File("p.txt")) << "# decode\n128 96 64 nn\n1 4096 4096 nt\n";
  o.problems_file = dir_.File("p.txt");
  absl::StatusOr<ExportReport> r = ExportLibrary(*store_, o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->shapes.size(), 2u);
  EXPECT_EQ(r->kernels, 1);
  EXPECT_EQ(r->shapes[0].path, "cublas");  // 1x4096x4096 nt: nothing stored
  EXPECT_EQ(r->shapes[0].reason, "no verified kernel stored");
}

int Shell(const std::string& command) {
  std::printf("+ %s\n", command.c_str());
  return std::system(command.c_str());
}

// The package configures, builds with nvcc (the example too), keeps its
// kernels' symbols apart, installs, and is found by find_package.
TEST_F(ExportTest, PackageBuildsInstallsAndIsFound) {
  ASSERT_TRUE(ExportLibrary(*store_, Options("pkg")).ok());
  const std::string pkg = dir_.File("pkg"), build = dir_.File("build"), cmake = ANVIL_CMAKE;
  ASSERT_EQ(Shell(cmake + " -S " + pkg + " -B " + build + " -DCMAKE_CUDA_COMPILER=" + ANVIL_NVCC +
                " > " + dir_.File("configure.log") + " 2>&1"), 0) << ReadText(dir_.File("configure.log"));
  ASSERT_EQ(Shell(cmake + " --build " + build + " -j2 > " + dir_.File("build.log") + " 2>&1"), 0)
      << ReadText(dir_.File("build.log"));
  const std::string lib = build + "/libanvil_hgemm.so";
  ASSERT_EQ(Shell("nm -D --defined-only " + lib + " | awk '{print $3}' | grep -v '^anvil_hgemm' | "
                "grep -v '^$' > " + dir_.File("extra.txt")), 256) << "only anvil_hgemm* is exported: "
                << ReadText(dir_.File("extra.txt"));
  ASSERT_EQ(Shell("nm " + lib + " > " + dir_.File("nm.txt")), 0);
  const std::string nm = ReadText(dir_.File("nm.txt"));
  for (const v1::Candidate* c : {&nt_, &nn_}) {
    EXPECT_NE(nm.find("anvil_k_" + c->id().substr(0, 8) + "_gemm"), std::string::npos);
  }
  EXPECT_EQ(nm.find(" anvil_gemm\n"), std::string::npos) << "no kernel keeps the bare ABI name";
  EXPECT_TRUE(fs::exists(build + "/check_hgemm"));
  const int check = Shell(build + "/check_hgemm " + pkg + "/manifest.csv");
  EXPECT_TRUE(WEXITSTATUS(check) == 77 || check == 0) << "77: no GPU here, 0: all checks passed";

  const std::string prefix = dir_.File("prefix"), user = dir_.File("user");
  ASSERT_EQ(Shell(cmake + " --install " + build + " --prefix " + prefix + " > /dev/null"), 0);
  fs::create_directories(user);
  std::ofstream(user + "/CMakeLists.txt")
      << "cmake_minimum_required(VERSION 3.24)\nproject(user LANGUAGES C)\n"
         "find_package(AnvilHGEMM CONFIG REQUIRED)\nadd_executable(user main.c)\n"
         "target_link_libraries(user PRIVATE AnvilHGEMM::anvil_hgemm)\n";
  std::ofstream(user + "/main.c") << "#include <anvil_hgemm.h>\n"
                                     "int main(void) { return anvil_hgemm_table_size() == 3 ? 0 : 1; }\n";
  ASSERT_EQ(Shell(cmake + " -S " + user + " -B " + user + "/build -DCMAKE_PREFIX_PATH=" + prefix +
                " > " + dir_.File("user.log") + " 2>&1 && " + cmake + " --build " + user +
                "/build >> " + dir_.File("user.log") + " 2>&1"), 0) << ReadText(dir_.File("user.log"));
  EXPECT_EQ(Shell(user + "/build/user"), 0) << "the table holds two kernels and one tuned algorithm";
  EXPECT_EQ(Shell("python3 -m py_compile " + prefix + "/lib/python/anvil_hgemm.py"), 0);
}

// Two kernels whose sources give one host symbol external linkage: the
// package build stops before linking and names the symbol and both objects.
TEST(ExportClash, PackageBuildNamesAClashingSymbol) {
  TempDir dir;
  std::unique_ptr<Store> store = *Store::Open(dir.File("anvil.db"));
  std::vector<v1::Candidate> candidates;
  for (const char* block : {"8", "16"}) {
    v1::Candidate c = SeedCandidate("01_naive", v1::LAYOUT_NT, {{"BLOCK", block}});
    c.set_source(absl::StrReplaceAll(c.source(), {{"namespace {", "namespace naive {"},
                                                  {"}  // namespace", "}  // namespace naive\nusing namespace naive;"}}));
    AssignCandidateId(c);
    c.set_name(CandidateDisplayName(c));
    ASSERT_TRUE(store->PutCandidate(c).ok());
    candidates.push_back(c);
  }
  for (size_t i = 0; i < candidates.size(); ++i) {
    const v1::Problem p = TestProblem(64 * (i + 1), 64, 64, v1::LAYOUT_NT, kGpu);
    for (int r = 0; r < 3; ++r) {
      ASSERT_TRUE(store->PutMeasurement(RegimeMeasurement(candidates[i], p, 10, 20, 12, 24, r, kVersions)).ok());
    }
  }
  ExportOptions o;
  o.gpu = kGpu;
  o.out_dir = dir.File("pkg");
  ASSERT_TRUE(ExportLibrary(*store, o).ok());
  const std::string cmake = ANVIL_CMAKE, build = dir.File("build"), log = dir.File("build.log");
  EXPECT_NE(Shell(cmake + " -S " + o.out_dir + " -B " + build + " -DANVIL_HGEMM_BUILD_EXAMPLES=OFF -DCMAKE_CUDA_COMPILER=" +
                  ANVIL_NVCC + " > " + log + " 2>&1 && " + cmake + " --build " + build + " -j2 >> " + log + " 2>&1"), 0);
  const std::string text = ReadText(log);
  EXPECT_NE(text.find("symbol clash:"), std::string::npos) << text;
  EXPECT_NE(text.find("naive_gemm"), std::string::npos) << text;
}

// The validators' comparison, compiled from the package's runtime with a
// table that expects an H100 with CUDA 13.0 and cuBLAS 13.1.0.
TEST_F(ExportTest, ValidatorsNameEachMismatch) {
  ASSERT_TRUE(ExportLibrary(*store_, Options("pkg")).ok());
  const std::string pkg = dir_.File("pkg"), bin = dir_.File("validators");
  ASSERT_EQ(Shell("c++ -std=c++17 -I" + pkg + "/include -I" + pkg + "/src -I" + ANVIL_CUDA_INCLUDE +
                  " " + ANVIL_SOURCE_DIR + "/export/validators_test_main.cc " + pkg +
                  "/src/anvil_hgemm.cc -L" + ANVIL_CUDA_LIB + " -lcublasLt -lcublas -lcudart -o " + bin +
                  " -Wl,-rpath," + ANVIL_CUDA_LIB), 0);
  EXPECT_EQ(Shell(bin), 0);
}

}  // namespace
}  // namespace anvil
