#include "worker/compile_log.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace anvil {
namespace {

TEST(TrimCompileLog, KeepsErrorsWithContextAndHidesScratch) {
  std::string log =
      "/tmp/anvil-build-x/candidate.cu(12): error: identifier \"foo\" is undefined\n"
      "    foo(1);\n"
      "    ^\n"
      "\n"
      "ptxas info    : Used 8 registers\n"
      "1 error detected in the compilation of \"/tmp/anvil-build-x/candidate.cu\".\n";
  std::string t = TrimCompileLog(log, "/tmp/anvil-build-x");
  EXPECT_NE(t.find("candidate.cu(12): error: identifier \"foo\" is undefined"), std::string::npos) << t;
  EXPECT_NE(t.find("foo(1);"), std::string::npos);
  EXPECT_EQ(t.find("/tmp/anvil-build-x"), std::string::npos) << t;
  EXPECT_EQ(t.find("ptxas info"), std::string::npos);
}

TEST(TrimCompileLog, FoldsDuplicatesAndCaps) {
  std::string log;
  for (int i = 0; i < 500; ++i) absl::StrAppend(&log, "x.cu(", i % 3, "): error: bad\n");
  std::string t = TrimCompileLog(log, "", 10, 4096);
  EXPECT_LE(std::count(t.begin(), t.end(), '\n'), 4);  // 3 distinct errors
  std::string big;
  for (int i = 0; i < 500; ++i) absl::StrAppend(&big, "x.cu(", i, "): error: bad\n");
  t = TrimCompileLog(big, "", 10, 4096);
  EXPECT_NE(t.find("more lines"), std::string::npos);
  EXPECT_LE(t.size(), 4200u);
}

TEST(TrimCompileLog, FallsBackToTheTail) {
  std::string t = TrimCompileLog("nvcc fatal\n", "");
  EXPECT_NE(t.find("nvcc fatal"), std::string::npos);
  t = TrimCompileLog("Killed\n", "");
  EXPECT_NE(t.find("Killed"), std::string::npos);
}

}  // namespace
}  // namespace anvil
