// The 03_wgmma_tma kernel's generated code is pinned: every default and
// suggested configuration of seed.json, in both layouts, is compiled to PTX with
// the builder's code-generation flags and its SHA-256 compared with
// 03_wgmma_tma/ptx_digests.txt. A refactor of kernel.cu that changes no
// instruction passes; one that does fails and names the configurations.
//
// The digests hold for one nvcc release (the file's first line); with another
// the test skips. ANVIL_PTX_DIGESTS_UPDATE=1 rewrites the file from the current
// kernel (after a deliberate change of its code). Runs nvcc, so it is slow
// (about 3 minutes on 2 cores) and labelled "nvcc"; it needs no GPU.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "proto/candidate.h"
#include "proto/problem.h"
#include "seeds/seeds.h"
#include "seeds/space.h"

namespace anvil {
namespace {
namespace fs = std::filesystem;

const std::string kNvcc = ANVIL_NVCC_FOR_TEST;
const std::string kCutlass = ANVIL_CUTLASS_DIR_FOR_TEST;
const std::string kDigests =
    std::string(ANVIL_SEEDS_DIR_FOR_TEST) + "/03_wgmma_tma/ptx_digests.txt";

// What `command` printed on stdout, and whether it exited with 0.
struct Output {
  bool ok = false;
  std::string text;
};
Output RunCommand(const std::string& command) {
  Output out;
  FILE* p = popen(command.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.text.append(buf, n);
  out.ok = pclose(p) == 0;
  return out;
}

// "13.0.88" from nvcc --version's "release 13.0, V13.0.88" line.
std::string NvccVersion() {
  const Output v = RunCommand("'" + kNvcc + "' --version");
  std::smatch m;
  if (!v.ok || !std::regex_search(v.text, m, std::regex("V([0-9.]+)"))) return "";
  return m[1];
}

// The -D flags the builder passes for `c` (worker/builder.cc: the layout, then
// every parameter in name order).
std::string Defines(const v1::Candidate& c) {
  std::vector<std::string> d = {c.layout() == v1::LAYOUT_NT ? "-DANVIL_LAYOUT_NT=1"
                                                            : "-DANVIL_LAYOUT_NN=1"};
  std::map<std::string, std::string> params(c.params().begin(), c.params().end());
  for (const auto& [k, v] : params) d.push_back(absl::StrCat("-DANVIL_", k, "=", v));
  return absl::StrJoin(d, " ");
}

// The builder's code-generation flags (-O3, C++17, sm_90a, CUTLASS includes)
// with -ptx in place of the shared-library link. -lineinfo is left out: it
// writes source line numbers into the PTX, which any edit above a line moves.
// The source is compiled as candidate.cu, as the builder writes it; the
// anonymous namespace's mangled name carries a hash of the file's text, which
// is masked (_GLOBAL__N__<8 hex>_ -> _GLOBAL__N__X_) before hashing.
std::string PtxCommand(const fs::path& dir, const std::string& defines) {
  return absl::StrCat("cd '", dir.string(), "' && '", kNvcc, "' -std=c++17 -O3 ",
                      "-gencode=arch=compute_90a,code=sm_90a -I'", kCutlass, "/include' -I'",
                      kCutlass, "/tools/util/include' ", defines,
                      " -ptx -o candidate.ptx candidate.cu 2>&1");
}

std::optional<std::string> PtxDigest(const fs::path& dir, const std::string& defines) {
  if (!RunCommand(PtxCommand(dir, defines)).ok) return std::nullopt;
  std::ifstream in(dir / "candidate.ptx");
  std::stringstream ptx;
  ptx << in.rdbuf();
  static const std::regex kAnon("_GLOBAL__N__[0-9a-f]{8}_");
  return Sha256Hex(std::regex_replace(ptx.str(), kAnon, "_GLOBAL__N__X_"));
}

struct Digests {
  std::string nvcc;
  std::map<std::string, std::string> by_flags;  // defines -> sha256
};

Digests ReadDigests() {
  Digests d;
  std::ifstream in(kDigests);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("# nvcc ", 0) == 0) d.nvcc = line.substr(7);
    if (line.empty() || line[0] == '#') continue;
    d.by_flags[line.substr(66)] = line.substr(0, 64);  // "<sha256>  <defines>"
  }
  return d;
}

bool HaveToolchain() { return fs::exists(kNvcc) && fs::exists(kCutlass + "/include/cute"); }

// A directory holding the family's kernel as candidate.cu; removed on exit.
struct ScratchSource {
  explicit ScratchSource(const std::string& source) {
    char tmpl[] = "/tmp/anvil-ptx-XXXXXX";
    if (mkdtemp(tmpl) != nullptr) dir = tmpl;
    if (!dir.empty()) std::ofstream(dir / "candidate.cu") << source;
  }
  ~ScratchSource() {
    std::error_code ec;
    if (!dir.empty()) fs::remove_all(dir, ec);
  }
  fs::path dir;
};

// The 03_wgmma_tma family and its kernel in a scratch directory; skips without
// nvcc or CUTLASS.
class WgmmaPtxIdentity : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveToolchain()) {
      GTEST_SKIP() << "needs nvcc and CUTLASS (" << kNvcc << ", " << kCutlass << ")";
    }
    absl::StatusOr<std::vector<SeedFamily>> seeds = LoadSeeds(ANVIL_SEEDS_DIR_FOR_TEST);
    ASSERT_TRUE(seeds.ok()) << seeds.status();
    for (SeedFamily& s : *seeds)
      if (s.name == "03_wgmma_tma") family_ = std::move(s);
    ASSERT_EQ(family_.name, "03_wgmma_tma");
    src_ = std::make_unique<ScratchSource>(family_.source);
    ASSERT_FALSE(src_->dir.empty());
  }
  SeedFamily family_;
  std::unique_ptr<ScratchSource> src_;
};

// Illegal combinations fail at compile time with the hardware reason (the
// kernel's static_asserts mirror seed.json's rules).
TEST_F(WgmmaPtxIdentity, IllegalCombinationsFailWithTheirReason) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"-DANVIL_LAYOUT_NT=1 -DANVIL_BN=128 -DANVIL_SCHEDULE=1", "Persistent tile loop"},
      {"-DANVIL_LAYOUT_NN=1 -DANVIL_BN=96", "128B swizzle limits a box's inner dimension"},
      {"-DANVIL_LAYOUT_NT=1 -DANVIL_PERSISTENT=2 -DANVIL_CLUSTER=2", "unequal unit ranges"},
      {"-DANVIL_LAYOUT_NT=1 -DANVIL_PERSISTENT=1 -DANVIL_SPLIT_K=4", "SPLIT_K must be 1"},
      {"-DANVIL_LAYOUT_NT=1 -DANVIL_STAGES=8", "227 KiB per-block limit"},
      {"-DANVIL_LAYOUT_NT=1 -DANVIL_PRODUCER_REGS=32 -DANVIL_CONSUMER_REGS=240",
       "launch allocation"},
  };
  for (const auto& [defines, reason] : cases) {
    const Output nvcc = RunCommand(PtxCommand(src_->dir, defines));
    const std::string& out = nvcc.text;
    EXPECT_FALSE(nvcc.ok) << defines << " compiled";
    EXPECT_NE(out.find("static assertion failed"), std::string::npos) << defines << "\n" << out;
    EXPECT_NE(out.find(reason), std::string::npos) << defines << ": no \"" << reason << "\"\n"
                                                   << out;
  }
}

TEST_F(WgmmaPtxIdentity, DefaultAndSuggestedConfigurationsCompileToThePinnedPtx) {
  const bool update = std::getenv("ANVIL_PTX_DIGESTS_UPDATE") != nullptr;
  const Digests pinned = ReadDigests();
  const std::string version = NvccVersion();
  if (!update && pinned.nvcc != version) {
    GTEST_SKIP() << "digests are for nvcc " << pinned.nvcc << ", this is nvcc " << version
                 << " (ANVIL_PTX_DIGESTS_UPDATE=1 records them for it)";
  }
  const SeedFamily* f = &family_;
  std::vector<KnobParams> configs = {{}};
  configs.insert(configs.end(), f->suggested.begin(), f->suggested.end());
  Digests now{version, {}};
  for (const KnobParams& p : configs) {
    for (v1::Layout layout : f->layouts) {
      if (!CheckConfig(*f, layout, WithDefaults(*f, p)).ok()) continue;
      const std::string defines = Defines(MakeSeedCandidate(*f, layout, p));
      if (now.by_flags.count(defines)) continue;  // a suggestion that repeats the defaults
      std::optional<std::string> digest = PtxDigest(src_->dir, defines);
      ASSERT_TRUE(digest.has_value()) << "nvcc failed: " << defines;
      now.by_flags[defines] = *digest;
      if (update) continue;
      auto want = pinned.by_flags.find(defines);
      if (want == pinned.by_flags.end()) {
        ADD_FAILURE() << "no pinned digest (a new configuration: record it with "
                         "ANVIL_PTX_DIGESTS_UPDATE=1): "
                      << defines;
      } else {
        EXPECT_EQ(*digest, want->second) << "the PTX changed: " << defines;
      }
    }
  }
  ASSERT_GE(now.by_flags.size(), 40u) << "too few configurations compiled";
  if (update) {
    std::ofstream out(kDigests);
    out << "# SHA-256 of the PTX of 03_wgmma_tma's default and suggested configurations\n"
        << "# (seeds/ptx_identity_test.cc says how it is made). Regenerate with\n"
        << "# ANVIL_PTX_DIGESTS_UPDATE=1 only for a deliberate change of the kernel's code.\n"
        << "# nvcc " << version << "\n";
    for (const auto& [defines, digest] : now.by_flags) out << digest << "  " << defines << "\n";
  }
}

}  // namespace
}  // namespace anvil
