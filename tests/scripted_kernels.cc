#include "tests/scripted_kernels.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "deploy/layout.h"
#include "seeds/seeds.h"

namespace anvil::testing {
namespace {

std::string Fenced(const std::string& prose, const std::string& source) {
  return absl::StrCat(prose, "\n```cuda\n", source, "```\n");
}

}  // namespace

std::string SeedSource(const std::string& family) {
  std::ifstream in(absl::StrCat(DefaultSeedsDir(deploy::ExecutableDir()), "/", family, "/kernel.cu"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string WithKnob(const std::string& source, const std::string& knob, int from, int to) {
  return absl::StrReplaceAll(source, {{absl::StrCat("#define ANVIL_", knob, " ", from, "\n"),
                                       absl::StrCat("#define ANVIL_", knob, " ", to, "\n")}});
}

std::string SwappedColumnPairs(const std::string& mma_source) {
  return absl::StrReplaceAll(mma_source, {{"const __half2 h = __floats2half2_rn(v0, v1);",
                                           "const __half2 h = __floats2half2_rn(v1, v0);"}});
}

std::string NoGpuWork(const std::string& mma_source) {
  return absl::StrReplaceAll(mma_source, {{"void* workspace, cudaStream_t stream) {",
                                           "void* workspace, cudaStream_t stream) {\n  if (M > 0) return 0;"}});
}

std::string WgmmaSkinnyStream(const std::string& wgmma_source) {
  std::string s = wgmma_source;
  const std::vector<std::tuple<const char*, int, int>> knobs = {
      {"BM", 128, 64},       {"BN", 256, 16},        {"STAGES", 4, 16},    {"CONSUMERS", 2, 1},
      {"CONSUMER_REGS", 232, 224}, {"PERSISTENT", 0, 1}, {"SWAP_AB", 0, 1}, {"SHAPE_M", 0, 16},
      {"SHAPE_N", 0, 4096},  {"SHAPE_K", 0, 4096}};
  for (const auto& [knob, from, to] : knobs) s = WithKnob(s, knob, from, to);
  return s;
}

std::vector<ScriptedChoice> FirstTurnChoices(int index) {
  const std::string mma = SeedSource("02_mma_sync"), wgmma = SeedSource("03_wgmma_tma");
  const std::vector<std::string> real = {WithKnob(mma, "STAGES", 4, 3), WithKnob(mma, "BK", 32, 64), wgmma,
                                         WithKnob(mma, "BM", 128, 64)};
  const std::string tag = absl::StrCat(index);
  return {
      {Fenced("A deeper or wider K pipeline hides global latency.",
              absl::StrCat("// v", tag, "\n", real[index % real.size()])),
       "speedup"},
      {Fenced("", absl::StrCat("// b", tag, "\n", mma, "\nthis line is not C++;\n")), "compile_error"},
      {Fenced("Paired half2 stores halve the store instructions.",
              absl::StrCat("// w", tag, "\n", SwappedColumnPairs(mma))),
       "incorrect"},
      {Fenced("", absl::StrCat("// u", tag, "\n", NoGpuWork(mma))), "cheat"},
      {"No.", "no_code"},
  };
}

ScriptedReply KernelAnswer(const ScriptedRequest& q, int index) {
  const nlohmann::json body = nlohmann::json::parse(q.body);
  if (body["messages"].size() > 2) {  // a repair turn: answer with the plain seed
    return OpenAiReply({Fenced("Fixed.", absl::StrCat("// repair ", index, "\n", SeedSource("02_mma_sync")))});
  }
  std::vector<std::string> texts;
  for (const ScriptedChoice& c : FirstTurnChoices(index)) texts.push_back(c.text);
  texts.resize(std::min<size_t>(texts.size(), body.value("n", 1)));
  return OpenAiReply(texts, 3000, 6000);
}

}  // namespace anvil::testing
