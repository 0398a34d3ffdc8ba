// The naming rules of node facts (no GPU needed): the model names, arch names,
// UUIDs and version texts that problem keys and version checks depend on.
#include "node/node_facts.h"

#include <gtest/gtest.h>

namespace anvil::node {
namespace {

TEST(NodeFactsTest, ModelNamesDropTheVendorAndJoinWords) {
  EXPECT_EQ(NormaliseGpuName("NVIDIA H100 80GB HBM3"), "H100-80GB-HBM3");
  EXPECT_EQ(NormaliseGpuName("NVIDIA H200"), "H200");
  EXPECT_EQ(NormaliseGpuName("  Tesla T4 "), "Tesla-T4");
}

TEST(NodeFactsTest, HopperTargetsItsArchSpecificFeatures) {
  EXPECT_EQ(ArchName(9, 0), "sm_90a");
  EXPECT_EQ(ArchName(8, 9), "sm_89");
  EXPECT_EQ(ArchName(10, 0), "sm_100");
}

TEST(NodeFactsTest, UuidsReadAsNvidiaSmiPrintsThem) {
  cudaUUID_t u{};
  for (int i = 0; i < 16; ++i) u.bytes[i] = static_cast<char>(i * 17);
  EXPECT_EQ(GpuUuid(u), "GPU-00112233-4455-6677-8899-aabbccddeeff");
}

TEST(NodeFactsTest, VersionTextsKeepTheirStoredForms) {
  Versions v;
  v.driver = 13000;
  v.runtime = 12080;
  v.cublas_major = 13, v.cublas_minor = 1, v.cublas_patch = 0;
  v.cublaslt = 130100;
  EXPECT_EQ(v.CublasCode(), 130100);
  EXPECT_EQ(MeasurementVersions(v), "cudart=12080 driver=13000 cublas=130100 cublaslt=130100");
  EXPECT_EQ(WorkerVersions(v), "driver=13000 cuda=12080 cublas=13.1.0");
}

TEST(NodeFactsTest, WithoutAGpuNothingIsListedAndWhyIsSaid) {
  std::string why;
  if (CountGpus(&why) > 0) GTEST_SKIP() << "a GPU is present";
  EXPECT_FALSE(why.empty());
  absl::StatusOr<std::vector<v1::GpuInfo>> gpus = ListGpus();
  EXPECT_TRUE(!gpus.ok() || gpus->empty());
}

}  // namespace
}  // namespace anvil::node
