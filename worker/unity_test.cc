// UnitySource, the unity translation unit and the ptxas split, without a
// compiler: what decides which configurations may share a translation unit.
#include "worker/unity.h"

#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "worker/unity_source.h"

namespace anvil {
namespace {

std::string Seed(const std::string& family) {
  std::ifstream in(std::string(ANVIL_SEEDS_DIR_FOR_TEST) + "/" + family + "/kernel.cu");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}
std::string Seed03() { return Seed("03_wgmma_tma"); }

MacroDefines Knobs(std::initializer_list<std::pair<std::string, std::string>> knobs) {
  MacroDefines d = {{"ANVIL_LAYOUT_NT", "1"}};
  for (const auto& [k, v] : knobs) d.emplace_back("ANVIL_" + k, v);
  return d;
}

constexpr char kExtended[] = "#define CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED 1\n";

TEST(UnitySource, Seed03PreludeFollowsTheWgmmaWidth) {
  const UnitySource u(Seed03());
  ASSERT_EQ(u.ineligible(), "");
  absl::StatusOr<std::string> base = u.Prelude(Knobs({{"BM", "128"}, {"BN", "256"}}));
  ASSERT_TRUE(base.ok()) << base.status();
  EXPECT_NE(base->find("#include <cute/arch/mma_sm90_gmma.hpp>"), std::string::npos) << *base;
  EXPECT_NE(base->find("#include <cuda.h>"), std::string::npos) << *base;
  EXPECT_EQ(base->find("CUTE_SM90_EXTENDED"), std::string::npos) << *base;
  // Same headers, same macros: the same prelude, so one group.
  EXPECT_EQ(*base, *u.Prelude(Knobs({{"BM", "64"}, {"BN", "128"}, {"STAGES", "8"}})));
  // WG_N 144 needs CuTe's extended shapes: defined before the CuTe header only.
  absl::StatusOr<std::string> ext = u.Prelude(Knobs({{"BN", "144"}}));
  ASSERT_TRUE(ext.ok()) << ext.status();
  const size_t def = ext->find(kExtended), cute = ext->find("#include <cute/");
  ASSERT_NE(def, std::string::npos) << *ext;
  EXPECT_GT(def, ext->find("#include <utility>"));
  EXPECT_LT(def, cute);
  EXPECT_NE(ext->find("#undef CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED", cute), std::string::npos);
  // SPLIT_COLS halves the width: BN 96 -> WG_N 48 (extended), BN 128 -> 64 (base).
  EXPECT_NE(u.Prelude(Knobs({{"SPLIT_COLS", "1"}, {"BN", "96"}}))->find(kExtended), std::string::npos);
  EXPECT_EQ(*u.Prelude(Knobs({{"SPLIT_COLS", "1"}, {"BN", "128"}})), *base);
  // A configuration the source refuses with #error builds alone (and gets its error there).
  absl::StatusOr<std::string> bad = u.Prelude(Knobs({{"SPLIT_COLS", "1"}, {"BN", "100"}}));
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("#error"), std::string::npos) << bad.status();
  EXPECT_FALSE(u.Prelude({{"ANVIL_LAYOUT_NT", "1"}, {"ANVIL_LAYOUT_NN", "1"}}).ok());
  // Every macro the source defines is undefined between configurations.
  const std::vector<std::string>& d = u.defined_macros();
  for (const char* m : {"ANVIL_BM", "ANVIL_WG_N", "ANVIL_GMMA_ATOM", "CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED"}) {
    EXPECT_NE(std::find(d.begin(), d.end(), m), d.end()) << m;
  }
}

// Every seed family can be built in unity groups: an edit of a seed that made
// it ineligible would cost the search most of its build throughput.
TEST(UnitySource, EverySeedFamilyCanBeGrouped) {
  for (const char* family : {"01_naive", "02_mma_sync", "03_wgmma_tma"}) {
    const std::string source = Seed(family);
    ASSERT_FALSE(source.empty()) << family;
    const UnitySource u(source);
    EXPECT_EQ(u.ineligible(), "") << family;
    for (const char* layout : {"ANVIL_LAYOUT_NT", "ANVIL_LAYOUT_NN"}) {
      absl::StatusOr<std::string> p = u.Prelude({{layout, "1"}});
      EXPECT_TRUE(p.ok()) << family << ": " << p.status();
    }
  }
}

TEST(UnitySource, EvaluatesConditionalsAsThePreprocessor) {
  const UnitySource u(R"(// a header comment
#if (ANVIL_A * 2 + 1) == 7 && !defined(ANVIL_B) || ANVIL_C > 0x10
#define HALF_OFF 1
#elif ANVIL_A % 3 == 1 ? ANVIL_A << 2 == 16 : 0
#define HALF_OFF 2
#else
#include <mma.h>
#define HALF_OFF 0
#endif
#if HALF_OFF
#define STEP(x) ((x) + HALF_OFF)
#endif
#include <cuda_fp16.h>
int after_the_includes = 1;
)");
  ASSERT_EQ(u.ineligible(), "");
  absl::StatusOr<std::string> a3 = u.Prelude({{"ANVIL_A", "3"}});
  ASSERT_TRUE(a3.ok()) << a3.status();
  EXPECT_EQ(*a3, "#define HALF_OFF 1\n#define STEP(x) ((x) + HALF_OFF)\n#include <cuda_fp16.h>\n"
                 "#undef HALF_OFF\n#undef STEP\n");
  EXPECT_EQ(*u.Prelude({{"ANVIL_A", "3"}, {"ANVIL_B", "1"}, {"ANVIL_C", "17"}}), *a3);
  EXPECT_NE(u.Prelude({{"ANVIL_A", "4"}})->find("#define HALF_OFF 2"), std::string::npos);
  const std::string other = "#include <mma.h>\n#define HALF_OFF 0\n#include <cuda_fp16.h>\n#undef HALF_OFF\n";
  EXPECT_EQ(*u.Prelude({{"ANVIL_A", "7"}}), other);
  EXPECT_EQ(*u.Prelude({}), other);
  EXPECT_EQ(u.global_names(), std::vector<std::string>{"after_the_includes"});
}

TEST(UnitySource, RefusesWhatTheHoistedHeadersWouldChange) {
  // Code before an #include would see headers it does not include yet.
  EXPECT_NE(UnitySource("int x;\n#include <cuda_fp16.h>\n").ineligible(), "");
  // #undef of a macro it does not define: a header's, which later configurations need.
  EXPECT_NE(UnitySource("#include <cuda_fp16.h>\n#undef CUDART_VERSION\n").ineligible(), "");
  EXPECT_EQ(UnitySource("#include <cuda_fp16.h>\n#define MINE 1\n#undef MINE\n#undef ANVIL_BM\n").ineligible(), "");
  EXPECT_NE(UnitySource("#include <cuda_fp16.h>\nint k = __COUNTER__;\n").ineligible(), "");
  // A conditional on a name a header might define, a function-like macro, a knob in a header's macro.
  const UnitySource header_name("#ifdef CUDART_VERSION\n#endif\n#include <cuda_fp16.h>\n");
  ASSERT_EQ(header_name.ineligible(), "");
  EXPECT_FALSE(header_name.Prelude({}).ok());
  const UnitySource fn("#define F(x) x\n#if F(1)\n#endif\n#include <cuda_fp16.h>\n");
  EXPECT_FALSE(fn.Prelude({}).ok());
  const UnitySource knob("#define WIDTH ANVIL_BN\n#include <cuda_fp16.h>\n");
  EXPECT_FALSE(knob.Prelude({{"ANVIL_BN", "8"}}).ok());
  // No #include at all: nothing to hoist.
  EXPECT_EQ(*UnitySource("__global__ void k() {}\n").Prelude({}), "");
}

TEST(UnitySource, GlobalNamesAreTheSourcesGlobalScopeDeclarators) {
  const UnitySource u(R"(#include <cuda_fp16.h>
__global__ void gemm(const __half* a) { int local = 0; }
__device__ __half max(__half a, __half b);
constexpr unsigned kMask = unsigned(1) << 3;
namespace cute { struct Mine; }
namespace {
__device__ float hidden(float x) { return x; }
}
template <int N> __global__ void tiled(float* p);
extern "C" int anvil_gemm(int m) { return std::max(m, 0); }
struct Tile;
template <int N> struct Stage : Tile { int s[N]; };
enum class Mode : int { kA };
union Bits { int i; float f; };
typedef Stage<2> Pair;
void takes(struct Tile* t);
)");
  EXPECT_EQ(u.global_names(),
            (std::vector<std::string>{"Pair", "anvil_gemm", "cute", "gemm", "kMask", "max", "takes", "tiled"}));
  EXPECT_EQ(u.global_types(), (std::vector<std::string>{"Bits", "Mode", "Stage", "Tile"}));
}

TEST(UnityTranslationUnit, NamespacesEachConfigurationAndRenamesTheAbi) {
  const std::string source = "#include <cuda_fp16.h>\n#ifndef ANVIL_T\n#define ANVIL_T 1\n#endif\n"
                             "extern \"C\" size_t anvil_workspace_bytes(int, int, int) { return ANVIL_T; }";
  const UnitySource u(source);
  const std::string tu = UnityTranslationUnit(u, source, *u.Prelude({}),
                                              {{{"ANVIL_LAYOUT_NT", "1"}, {"ANVIL_T", "2"}},
                                               {{"ANVIL_LAYOUT_NT", "1"}, {"ANVIL_T", "3"}}});
  const size_t prelude = tu.find("#include <cuda_fp16.h>");
  const size_t c0 = tu.find("#define ANVIL_T 2\n#define anvil_workspace_bytes anvil_unity_0_anvil_workspace_bytes\n"
                            "#define anvil_gemm anvil_unity_0_anvil_gemm\n"
                            "namespace anvil_unity_0 {\n#line 1 \"candidate.cu\"\n#include <cuda_fp16.h>");
  const size_t end0 = tu.find("}  // namespace anvil_unity_0\n#undef ANVIL_LAYOUT_NT\n#undef ANVIL_T\n"
                              "#undef anvil_gemm\n#undef anvil_workspace_bytes\n");
  const size_t c1 = tu.find("namespace anvil_unity_1 {");
  ASSERT_NE(prelude, std::string::npos) << tu;
  ASSERT_NE(c0, std::string::npos) << tu;
  ASSERT_NE(end0, std::string::npos) << tu;
  ASSERT_NE(c1, std::string::npos) << tu;
  EXPECT_LT(prelude, c0);
  EXPECT_LT(c0, end0);
  EXPECT_LT(end0, c1);
  EXPECT_NE(tu.find("#if defined(ANVIL_T)\n#error"), std::string::npos) << tu;
  EXPECT_NE(tu.find("#if !defined(anvil_workspace_bytes)\nextern anvil_unity_name_probe anvil_workspace_bytes;"),
            std::string::npos)
      << tu;
  EXPECT_EQ(UnityLinkAliases(2), (std::vector<std::string>{
                                     "-Xlinker", "--defsym=anvil_workspace_bytes=anvil_unity_2_anvil_workspace_bytes",
                                     "-Xlinker", "--defsym=anvil_gemm=anvil_unity_2_anvil_gemm"}));
}

TEST(UnityUsage, KernelsGoToTheConfigurationTheirNamespaceNames) {
  EXPECT_EQ(UnityConfigOf("_ZN13anvil_unity_341_GLOBAL__N__9be045f7_9_unity_cu_8d489cdd8pad_rowsEPK6__halfPS1_iii"), 3);
  EXPECT_EQ(UnityConfigOf("_ZN14anvil_unity_1241_GLOBAL__N__9be045f7_9_unity_cu_8d489cdd4fillEv"), 12);
  EXPECT_EQ(UnityConfigOf("_ZN13anvil_unity_04gemmEPK6__half"), 0);
  EXPECT_EQ(UnityConfigOf("_Z4gemmPK6__halfS1_PS_iii"), -1);
  EXPECT_EQ(UnityConfigOf("_Z12anvil_unity_v"), -1);
  std::vector<v1::KernelUsage> usage(4);
  usage[0].set_kernel("_ZN13anvil_unity_14fillEv");
  usage[1].set_kernel("_ZN13anvil_unity_04fillEv");
  usage[2].set_kernel("_ZN4cute6kernelILi3EEEvv");  // a header's template: any configuration may use it
  usage[3].set_kernel("_ZN13anvil_unity_24fillEv");   // no such configuration: all, like the above
  std::vector<std::vector<v1::KernelUsage>> split = SplitUsage(usage, 2);
  ASSERT_EQ(split.size(), 2u);
  ASSERT_EQ(split[0].size(), 3u);
  EXPECT_EQ(split[0][0].kernel(), usage[1].kernel());
  EXPECT_EQ(split[0][1].kernel(), usage[2].kernel());
  ASSERT_EQ(split[1].size(), 3u);
  EXPECT_EQ(split[1][0].kernel(), usage[0].kernel());
}

}  // namespace
}  // namespace anvil
