#include "server/proposers/llm/extract.h"

#include <gtest/gtest.h>

namespace anvil {
namespace {

const char kKernel[] =
    "#include <cuda_fp16.h>\n"
    "__global__ void k(const __half* A, __half* C) {}\n"
    "extern \"C\" size_t anvil_workspace_bytes(int M, int N, int K) { return 0; }\n"
    "extern \"C\" int anvil_gemm(const __half* A, const __half* B, __half* C, int M, int N, int K,\n"
    "                            void* workspace, cudaStream_t stream) { return 0; }\n";

TEST(FencedBlocks, ReadsSeveralBlocksOddFencesAndACutOffOne) {
  std::vector<std::string> b = FencedBlocks(
      "text\n```cuda\none\n```\nmore\n~~~~ c++\ntwo\n```\nstill two\n~~~~\n  ```\nthree");
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0], "one\n");
  EXPECT_EQ(b[1], "two\n```\nstill two\n");  // a shorter or other fence does not close
  EXPECT_EQ(b[2], "three\n");               // cut off: kept
  EXPECT_TRUE(FencedBlocks("no code here").empty());
}

TEST(AbiProblem, WantsBothSymbolsWithCLinkage) {
  EXPECT_EQ(AbiProblem(kKernel), "");
  EXPECT_NE(AbiProblem("int anvil_gemm(int);"), "");
  std::string no_c = kKernel;
  no_c.replace(no_c.find("extern \"C\""), 10, "static");
  no_c.replace(no_c.find("extern \"C\""), 10, "static");
  EXPECT_NE(AbiProblem(no_c).find("extern"), std::string::npos);
}

TEST(Extractor, AcceptsChecksAndDeduplicates) {
  Extractor x(sandbox::SourcePolicy{});
  std::string answer = std::string("The faster one used 4 stages.\n```cuda\n") + kKernel + "```\n";
  Extraction e = x.Extract(answer);
  ASSERT_EQ(e.kernels.size(), 1u);
  EXPECT_EQ(e.prose, "The faster one used 4 stages.");
  EXPECT_EQ(e.kernels[0].hash.size(), 64u);
  Extraction again = x.Extract(answer);  // trailing white space changes nothing
  ASSERT_TRUE(again.kernels.empty());
  EXPECT_EQ(again.refused[0].first, "duplicate");
  Extraction evil = x.Extract(std::string("```\n#include <sys/socket.h>\n") + kKernel + "```");
  ASSERT_EQ(evil.refused.size(), 1u);
  EXPECT_EQ(evil.refused[0].first, "policy");
  EXPECT_EQ(x.Extract("I cannot help with that.").refused[0].first, "no_code");
  EXPECT_EQ(x.Extract("```\nint anvil_gemm(int x);\n```").refused[0].first, "abi");
  Extraction bare = x.Extract(std::string(kKernel) + "// bare\n");
  EXPECT_EQ(bare.kernels.size(), 1u);
}

}  // namespace
}  // namespace anvil
