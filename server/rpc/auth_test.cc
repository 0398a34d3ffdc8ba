#include "server/rpc/auth.h"

#include <fstream>

#include <gtest/gtest.h>

namespace anvil::rpc {
namespace {

TEST(TokenAuth, FileBeatsEnvironmentAndTrims) {
  const std::string path = ::testing::TempDir() + "/token";
  std::ofstream(path) << "s3cret\n";
  absl::StatusOr<TokenAuth> a = TokenAuth::Load(path, {{"ANVIL_AUTH_TOKEN", "other"}});
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->CheckHeader("Bearer s3cret").ok());
  EXPECT_EQ(a->CheckHeader("Bearer other").code(), absl::StatusCode::kUnauthenticated);
}

TEST(TokenAuth, Refusals) {
  TokenAuth a = TokenAuth::ForToken("s3cret");
  EXPECT_EQ(a.CheckHeader(std::nullopt).code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(a.CheckHeader("s3cret").code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(a.CheckHeader("Bearer s3cre").code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(a.CheckHeader("Bearer s3cret ").code(), absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(a.CheckHeader("bearer s3cret").ok());
  absl::Status wrong = a.CheckHeader("Bearer guess");
  EXPECT_EQ(wrong.message().find("s3cret"), std::string::npos);  // never echoes the secret
}

TEST(TokenAuth, OffUnlessConfigured) {
  absl::StatusOr<TokenAuth> a = TokenAuth::Load("", {});
  ASSERT_TRUE(a.ok());
  EXPECT_FALSE(a->enabled());
  EXPECT_TRUE(a->CheckHeader(std::nullopt).ok());
  absl::StatusOr<TokenAuth> env = TokenAuth::Load("", {{"ANVIL_AUTH_TOKEN", "t"}});
  ASSERT_TRUE(env.ok());
  EXPECT_TRUE(env->enabled());
  const std::string empty = ::testing::TempDir() + "/empty_token";
  std::ofstream(empty) << "  \n";
  EXPECT_EQ(TokenAuth::Load(empty, {}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TokenAuth::Load("/nonexistent/token", {}).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace anvil::rpc
