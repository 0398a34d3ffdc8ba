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

TEST(LoadPrompt, EveryTemplateRendersWithItsFields) {
  const std::map<std::string, std::vector<const char*>> fields = {
      {"system", {"gpu", "arch", "sm_count", "device_facts"}},
      {"task", {"b_operand", "m", "n", "k", "layout", "figure", "best"}},
      {"contrastive", {"exemplars"}},
      {"repair", {"name", "failure", "log"}}};
  for (const auto& [name, keys] : fields) {
    absl::StatusOr<std::string> t = LoadPrompt(ANVIL_PROMPTS_DIR_FOR_TEST, name);
    ASSERT_TRUE(t.ok()) << t.status();
    std::map<std::string, std::string> v;
    for (const char* k : keys) v[k] = "x";
    EXPECT_TRUE(RenderPrompt(*t, v).ok()) << name;
  }
  absl::StatusOr<std::string> version = PromptsVersion(ANVIL_PROMPTS_DIR_FOR_TEST);
  ASSERT_TRUE(version.ok());
  EXPECT_FALSE(version->empty());
}

}  // namespace
}  // namespace anvil
