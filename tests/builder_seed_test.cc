// Unity builds of the real 03_wgmma_tma family (real nvcc, no GPU; about 40 s
// on 2 cores, labelled "nvcc"): suggested configurations of seed.json, with
// base-shape and extended-shape wgmma widths, build in unity groups; every
// shared object exports the ABI; a configuration's kernels, resources and
// host answers are those of the same candidate built alone; and its PTX in the
// unity translation unit is its PTX alone, instruction for instruction.
#include <dlfcn.h>
#include <stdio.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <tuple>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "seeds/seeds.h"
#include "seeds/space.h"
#include "worker/builder.h"
#include "worker/unity.h"

namespace anvil {
namespace {

std::string BuildLog(const v1::Build& b) {
  std::ifstream in(std::filesystem::path(b.artifact()).parent_path().string() + "/build.log");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

using WorkspaceFn = size_t (*)(int, int, int);

// The candidate's anvil_workspace_bytes, loaded as the runner loads it; null
// when it does not export both ABI functions.
WorkspaceFn Load(const std::string& so, const std::string& cuda_root) {
  for (const char* lib : {"/lib64/libcudart.so", "/lib/libcudart.so"}) {
    if (dlopen((cuda_root + lib).c_str(), RTLD_NOW | RTLD_GLOBAL) != nullptr) break;
  }
  void* h = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    ADD_FAILURE() << dlerror();
    return nullptr;
  }
  if (dlsym(h, "anvil_gemm") == nullptr) return nullptr;
  return reinterpret_cast<WorkspaceFn>(dlsym(h, "anvil_workspace_bytes"));
}

// A kernel's function name (the last name of its mangled nested name, which
// is the same alone and in a unity namespace) -> what ptxas reported for it.
std::map<std::string, std::tuple<int, int64_t, int64_t, int64_t, int64_t>> ByFunction(const v1::Build& b) {
  std::map<std::string, std::tuple<int, int64_t, int64_t, int64_t, int64_t>> out;
  for (const v1::KernelUsage& u : b.usage()) {
    const std::string& m = u.kernel();
    std::string last;
    for (size_t i = m.rfind("_ZN", 0) == 0 ? 3 : std::string::npos; i < m.size() && m[i] != 'E';) {
      size_t len = 0;
      while (i < m.size() && std::isdigit(static_cast<unsigned char>(m[i]))) len = len * 10 + (m[i++] - '0');
      if (len == 0) break;
      last = m.substr(i, len);
      i += len;
    }
    out[last] = {u.registers(), u.shared_bytes(), u.spill_store_bytes(), u.spill_load_bytes(),
                 u.stack_frame_bytes()};
  }
  return out;
}

bool Extended(const std::map<std::string, std::string>& p) {
  static const std::set<std::string> kBase = {"16", "32", "64", "96", "128", "192", "256"};
  return p.count("SPLIT_COLS") == 0 && p.count("BN") && kBase.count(p.at("BN")) == 0;
}

const SeedFamily* Family03(const std::vector<SeedFamily>& seeds) {
  for (const SeedFamily& s : seeds) {
    if (s.name == "03_wgmma_tma") return &s;
  }
  return nullptr;
}

// The first `base` base-shape suggested configurations, then the first
// extended-shape one and `more_extended` variants of it (other STAGES).
std::vector<std::map<std::string, std::string>> Pick(const SeedFamily& f, size_t base, int more_extended) {
  std::vector<std::map<std::string, std::string>> picked;
  std::optional<std::map<std::string, std::string>> extended;
  for (const auto& s : f.suggested) {
    if (!Extended(s) && picked.size() < base) picked.push_back(s);
    if (Extended(s) && !extended) extended = s;
  }
  if (!extended) return {};
  picked.push_back(*extended);
  for (int k = 0; k < more_extended; ++k) {
    std::map<std::string, std::string> p = *extended;
    p["STAGES"] = std::to_string(3 + k);
    if (CheckConfig(f, v1::LAYOUT_NT, p).ok()) picked.push_back(p);
  }
  return picked;
}

// Runs `command` (a shell line); true when it exits 0.
bool Shell(const std::string& command) {
  FILE* p = popen((command + " > /dev/null 2>&1").c_str(), "r");
  return p != nullptr && pclose(p) == 0;
}

// A PTX module's functions (.entry and .func) of unity configuration `config`
// (-1: those of none, a build alone), by their function name, each body with what depends only on its
// place in the module masked: symbol names, basic-block label numbers, debug
// string and file numbers. Source line numbers stay.
std::map<std::string, std::string> Functions(const std::string& ptx, int config) {
  static const std::regex kDecl(R"((\.entry|\.func)\s+(\([^)]*\)\s*)?([A-Za-z0-9_$]+))");
  static const std::vector<std::pair<std::regex, std::string>> kMasks = {
      {std::regex(R"(_Z[A-Za-z0-9_]+)"), "SYM"},
      {std::regex(R"(\$L__BB[0-9]+_)"), "$L__BB_"},
      {std::regex(R"(\$L__info_string[0-9]+)"), "$L__info_string"},
      {std::regex(R"(\.loc\s+[0-9]+)"), ".loc F"}};
  std::map<std::string, std::string> out;
  for (auto it = std::sregex_iterator(ptx.begin(), ptx.end(), kDecl); it != std::sregex_iterator(); ++it) {
    const std::string name = (*it)[3];
    if (UnityConfigOf(name) != config) continue;
    const size_t start = it->position(0), end = ptx.find("\n}\n", start);
    std::string body = ptx.substr(start, end == std::string::npos ? std::string::npos : end - start);
    for (const auto& [re, mask] : kMasks) body = std::regex_replace(body, re, mask);
    v1::Build b;  // reuse ByFunction's name parse
    b.add_usage()->set_kernel(name);
    out[ByFunction(b).begin()->first] = body;
  }
  return out;
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// nvcc and the 03_wgmma_tma family, or the test is skipped.
class BuilderSeed : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<Toolchain> t = Toolchain::Find();
    if (!t.ok()) GTEST_SKIP() << "no nvcc here: " << t.status();
    toolchain.emplace(*std::move(t));
    absl::StatusOr<std::vector<SeedFamily>> loaded = LoadSeeds(ANVIL_SEEDS_DIR_FOR_TEST);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    seeds = *std::move(loaded);
    f = Family03(seeds);
    ASSERT_NE(f, nullptr);
  }
  std::optional<Toolchain> toolchain;
  std::vector<SeedFamily> seeds;
  const SeedFamily* f = nullptr;
};

TEST_F(BuilderSeed, Wgmma03SuggestedConfigurationsBuildInUnityGroups) {
  // Three base-shape suggested configurations, the extended-shape one (WG_N
  // 144), and a second extended one so that it has a group too.
  const std::vector<std::map<std::string, std::string>> picked = Pick(*f, 3, 1);
  ASSERT_EQ(picked.size(), 5u) << "seed.json suggests an extended-shape width (BN 144)";
  std::vector<v1::Candidate> cs;
  for (const auto& p : picked) cs.push_back(MakeSeedCandidate(*f, v1::LAYOUT_NT, p));

  absl::StatusOr<sandbox::ScratchDir> dir = sandbox::ScratchDir::Create("/tmp", "builder-seed-test-");
  ASSERT_TRUE(dir.ok());
  BuilderOptions o;
  o.toolchain = *toolchain;
  o.cache_dir = dir->path() + "/cache";
  o.scratch_dir = dir->path();
  o.isolation = sandbox::Isolation::kAuto;
  o.jobs = 2;
  const Builder unity(o);
  std::vector<absl::StatusOr<v1::Build>> r = unity.BuildAll(cs);
  for (size_t k = 0; k < cs.size(); ++k) {
    ASSERT_TRUE(r[k].ok()) << r[k].status();
    ASSERT_EQ(r[k]->verdict(), v1::VERDICT_PASSED) << cs[k].name() << ": " << r[k]->error();
    EXPECT_EQ(r[k]->candidate_id(), cs[k].id());
    const std::string log = BuildLog(*r[k]);
    EXPECT_NE(log.find(k < 3 ? "unity group of 3" : "unity group of 2"), std::string::npos)
        << cs[k].name() << ": " << log;
    EXPECT_NE(Load(r[k]->artifact(), toolchain->cuda_root), nullptr) << cs[k].name() << " lacks the ABI";
    EXPECT_GE(r[k]->usage_size(), 1);
  }

  // One base and one extended configuration again, alone (a cache of their own).
  o.cache_dir = dir->path() + "/alone";
  o.unity = 1;
  const Builder alone(o);
  const std::vector<v1::Candidate> again = {cs[0], cs[3]};
  std::vector<absl::StatusOr<v1::Build>> a = alone.BuildAll(again);
  for (size_t k = 0; k < again.size(); ++k) {
    const v1::Build& grouped = *r[k == 0 ? 0 : 3];
    ASSERT_TRUE(a[k].ok()) << a[k].status();
    ASSERT_EQ(a[k]->verdict(), v1::VERDICT_PASSED) << a[k]->error();
    EXPECT_NE(BuildLog(*a[k]).find("compiled alone"), std::string::npos);
    EXPECT_EQ(a[k]->cache_key(), grouped.cache_key());
    EXPECT_EQ(a[k]->flags(), grouped.flags());
    EXPECT_EQ(ByFunction(*a[k]), ByFunction(grouped)) << again[k].name();
    EXPECT_EQ(ByFunction(grouped).count("wgmma_tma_gemm"), 1u);
    WorkspaceFn x = Load(a[k]->artifact(), toolchain->cuda_root);
    WorkspaceFn y = Load(grouped.artifact(), toolchain->cuda_root);
    ASSERT_TRUE(x && y);
    for (auto [m, n, kk] : {std::tuple{4096, 4096, 4096}, {1001, 999, 77}, {8, 12288, 4100}}) {
      EXPECT_EQ(x(m, n, kk), y(m, n, kk)) << again[k].name() << " " << m << "x" << n << "x" << kk;
    }
  }
}

// The translation unit the builder compiles for a group, compiled to PTX: each
// configuration's functions are those of its source compiled alone, with the
// builder's code-generation flags and -lineinfo (so its line numbers too).
TEST_F(BuilderSeed, Wgmma03UnityPtxIsEachConfigurationsPtxAlone) {
  absl::StatusOr<sandbox::ScratchDir> dir = sandbox::ScratchDir::Create("/tmp", "builder-seed-ptx-");
  ASSERT_TRUE(dir.ok());
  const std::string d = dir->path();
  std::ofstream(d + "/candidate.cu") << f->source;
  const std::string nvcc = absl::StrCat(
      "cd '", d, "' && '", toolchain->nvcc, "' -std=c++17 -O3 -lineinfo -gencode=arch=compute_90a,code=sm_90a -I'",
      toolchain->cutlass_dir, "/include' -ptx ");
  const UnitySource source(f->source);
  ASSERT_EQ(source.ineligible(), "");
  const std::vector<std::map<std::string, std::string>> all = Pick(*f, 3, 1);
  ASSERT_EQ(all.size(), 5u);
  // The base-shape group and the extended-shape group.
  for (const auto& group : {std::vector(all.begin(), all.begin() + 3), std::vector(all.begin() + 3, all.end())}) {
    std::vector<MacroDefines> configs;
    for (const auto& p : group) {
      const v1::Candidate c = MakeSeedCandidate(*f, v1::LAYOUT_NT, p);
      MacroDefines m = {{"ANVIL_LAYOUT_NT", "1"}};
      for (const auto& [k, v] : std::map<std::string, std::string>(c.params().begin(), c.params().end())) {
        m.emplace_back("ANVIL_" + k, v);
      }
      configs.push_back(m);
    }
    absl::StatusOr<std::string> prelude = source.Prelude(configs[0]);
    ASSERT_TRUE(prelude.ok()) << prelude.status();
    for (const MacroDefines& m : configs) EXPECT_EQ(*source.Prelude(m), *prelude) << "one group";
    std::ofstream(d + "/unity.cu") << UnityTranslationUnit(source, f->source, *prelude, configs);
    ASSERT_TRUE(Shell(nvcc + "-o unity.ptx unity.cu")) << "the unity translation unit compiles";
    const std::string unity = ReadText(d + "/unity.ptx");
    for (size_t k = 0; k < configs.size(); ++k) {
      std::vector<std::string> defines;
      for (const auto& [name, value] : configs[k]) defines.push_back(absl::StrCat("-D", name, "=", value));
      ASSERT_TRUE(Shell(absl::StrCat(nvcc, absl::StrJoin(defines, " "), " -o alone.ptx candidate.cu")));
      const std::map<std::string, std::string> alone = Functions(ReadText(d + "/alone.ptx"), -1);
      const std::map<std::string, std::string> grouped = Functions(unity, static_cast<int>(k));
      EXPECT_EQ(alone.count("wgmma_tma_gemm"), 1u);
      ASSERT_EQ(alone.size(), grouped.size()) << absl::StrJoin(defines, " ");
      for (const auto& [name, body] : alone) {
        EXPECT_TRUE(grouped.count(name) && grouped.at(name) == body)
            << name << " of " << absl::StrJoin(defines, " ") << " differs in the unity build";
      }
    }
  }
}

}  // namespace
}  // namespace anvil
