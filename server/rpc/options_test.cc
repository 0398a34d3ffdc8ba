#include "server/rpc/options.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace anvil {
namespace {

std::string WriteTemp(const std::string& name, const std::string& text) {
  std::string path = absl::StrCat(::testing::TempDir(), "/", name);
  std::ofstream(path) << text;
  return path;
}

TEST(ServerOptions, FileThenEnvironmentThenFlag) {
  ServerOptions o;
  std::string path = WriteTemp("a.toml",
                               "[server]\nlisten = \"127.0.0.1:7000\"\ndrain_seconds = 5\n"
                               "[tls]\ncert_file = \"c.pem\"\nkey_file = \"k.pem\"\n"
                               "[keepalive]\npermit_without_calls = false\n");
  ASSERT_TRUE(ApplyConfigFile(path, o).ok());
  EXPECT_EQ(o.listen, "127.0.0.1:7000");
  EXPECT_EQ(o.drain_seconds, 5);
  EXPECT_EQ(o.cert_file, "c.pem");
  EXPECT_FALSE(o.permit_keepalive_without_calls);
  ASSERT_TRUE(ApplyEnvironment({{"ANVIL_SERVER_LISTEN", "127.0.0.1:7001"},
                                {"ANVIL_JOBS_MAX_ACTIVE_JOBS", "9"}, {"HOME", "/x"}}, o).ok());
  EXPECT_EQ(o.listen, "127.0.0.1:7001");
  EXPECT_EQ(o.max_active_jobs, 9);
  ASSERT_TRUE(ApplyOption("server.listen", "127.0.0.1:7002", o).ok());
  EXPECT_EQ(o.listen, "127.0.0.1:7002");
  EXPECT_TRUE(ValidateServerOptions(o).ok());
}

TEST(ServerOptions, BadInputNamesWhere) {
  ServerOptions o;
  absl::Status unknown = ApplyConfigFile(WriteTemp("b.toml", "[server]\n\nlisen = \"x:1\"\n"), o);
  EXPECT_EQ(unknown.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.message().find(":3: unknown option server.lisen"), std::string::npos) << unknown;
  absl::Status type = ApplyConfigFile(WriteTemp("c.toml", "[jobs]\nmax_active_jobs = \"many\"\n"), o);
  EXPECT_NE(type.message().find("jobs.max_active_jobs must be an integer"), std::string::npos) << type;
  absl::Status syntax = ApplyConfigFile(WriteTemp("d.toml", "[server\nlisten=1\n"), o);
  EXPECT_EQ(syntax.code(), absl::StatusCode::kInvalidArgument) << syntax;
  EXPECT_EQ(ApplyConfigFile("/nonexistent/anvil.toml", o).code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(ApplyEnvironment({{"ANVIL_SERVER_DRAIN_SECONDS", "soon"}}, o).ok());
  EXPECT_FALSE(ApplyOption("server.nope", "1", o).ok());
  ServerOptions half;
  half.cert_file = "c.pem";
  EXPECT_FALSE(ValidateServerOptions(half).ok());  // a cert without its key
}

// Every option of the table is documented in server/CONFIG.md and set in the
// example anvil.toml, so neither drifts from the code.
TEST(ServerOptions, DocumentedAndInTheExample) {
  std::stringstream doc, example;
  doc << std::ifstream(ANVIL_SOURCE_DIR "/server/CONFIG.md").rdbuf();
  example << std::ifstream(ANVIL_SOURCE_DIR "/server/anvil.toml").rdbuf();
  ASSERT_FALSE(doc.str().empty());
  ServerOptions from_example;
  ASSERT_TRUE(ApplyConfigFile(ANVIL_SOURCE_DIR "/server/anvil.toml", from_example).ok());
  for (const ServerOptionInfo& o : ListServerOptions()) {
    EXPECT_NE(doc.str().find(absl::StrCat("`", o.name, "`")), std::string::npos) << o.name;
    const std::string key = o.name.substr(o.name.find('.') + 1);
    EXPECT_NE(example.str().find(key + " ="), std::string::npos) << o.name;
  }
}

}  // namespace
}  // namespace anvil
