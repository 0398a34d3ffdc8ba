#include "prompts/prompts.h"

#include <gtest/gtest.h>

namespace anvil {
namespace {

TEST(RenderPrompt, FillsEveryPlaceholder) {
  absl::StatusOr<std::string> r = RenderPrompt("M={{m}}, N={{n}}; {{m}}", {{"m", "16"}, {"n", "8"}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, "M=16, N=8; 16");
}

TEST(RenderPrompt, RefusesHoles) {
  EXPECT_FALSE(RenderPrompt("{{missing}}", {}).ok());
  EXPECT_FALSE(RenderPrompt("{{open", {}).ok());
}

TEST(LoadPrompt, TheProposalTemplateRendersWithItsFields) {
  absl::StatusOr<std::string> t = LoadPrompt(ANVIL_PROMPTS_DIR_FOR_TEST, "propose_kernel");
  ASSERT_TRUE(t.ok()) << t.status();
  std::map<std::string, std::string> v;
  for (const char* k : {"gpu", "arch", "b_operand", "m", "n", "k", "layout", "hardware",
                        "best_speedup", "figure", "best_source", "contrastive", "repair"}) {
    v[k] = "x";
  }
  EXPECT_TRUE(RenderPrompt(*t, v).ok());
}

}  // namespace
}  // namespace anvil
