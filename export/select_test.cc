#include "export/select.h"

#include <gtest/gtest.h>

#include "export/export_test_util.h"

namespace anvil::exporter {
namespace {

using testing_util::RegimeMeasurement;
using testing_util::TempDir;
using testing_util::TestProblem;

constexpr char kVersions[] = "cudart=13000 driver=13000 cublas=130100 cublaslt=130100";

class SelectTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = *Store::Open(dir_.File("anvil.db"));
    candidate_ = testing_util::SeedCandidate("01_naive", v1::LAYOUT_NT, {{"BLOCK", "16"}});
    ASSERT_TRUE(store_->PutCandidate(candidate_).ok());
  }
  void Measure(double hot, double cold, double base_hot, double base_cold, int64_t at = 1000) {
    ASSERT_TRUE(store_->PutMeasurement(RegimeMeasurement(candidate_, problem_, hot, cold, base_hot,
                                                         base_cold, at, kVersions)).ok());
  }
  TempDir dir_;
  std::unique_ptr<Store> store_;
  v1::Candidate candidate_;
  v1::Problem problem_ = TestProblem(256, 128, 64);
};

TEST_F(SelectTest, ReMeasurementsGiveMedianAndRange) {
  Measure(10, 20, 12, 22, 1000);   // 1.20 hot, 1.10 cold
  Measure(10, 20, 11, 24, 3000);   // 1.10, 1.20
  Measure(10, 20, 11.5, 23, 2000); // 1.15, 1.15
  absl::StatusOr<WinnerFigures> f = FiguresOf(*store_, problem_, candidate_.id());
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->hot.measurements, 3);
  EXPECT_NEAR(f->hot.speedup, 1.15, 1e-9);
  EXPECT_NEAR(f->hot.speedup_low, 1.10, 1e-9);
  EXPECT_NEAR(f->hot.speedup_high, 1.20, 1e-9);
  EXPECT_NEAR(f->cold.speedup_low, 1.10, 1e-9);
  EXPECT_EQ(f->hot.baseline, "cublaslt_auto");  // the fastest of the three
  EXPECT_EQ(f->measured_unix_ms, 3000);
  EXPECT_EQ(f->versions, kVersions);
  std::string why;
  EXPECT_TRUE(ClearsMargin(*f, 0.02, &why)) << why;
  EXPECT_FALSE(ClearsMargin(*f, 0.12, &why));
  EXPECT_NE(why.find("hot"), std::string::npos) << why;
}

TEST_F(SelectTest, TheLowEndDecidesNotTheMedian) {
  Measure(10, 10, 11, 11);
  Measure(10, 10, 11, 11);
  Measure(10, 10, 11, 10.1);  // one fresh process: cold 1.01x
  absl::StatusOr<WinnerFigures> f = FiguresOf(*store_, problem_, candidate_.id());
  ASSERT_TRUE(f.ok());
  EXPECT_NEAR(f->cold.speedup, 1.10, 1e-9);
  std::string why;
  EXPECT_FALSE(ClearsMargin(*f, 0.02, &why));
  EXPECT_NE(why.find("cold"), std::string::npos) << why;
}

TEST_F(SelectTest, OneMeasurementUsesItsSamplesSpread) {
  Measure(10, 10, 10.5, 10.5);  // 1.05x, spreads 1% each: low end 1.05 * 0.99
  absl::StatusOr<WinnerFigures> f = FiguresOf(*store_, problem_, candidate_.id());
  ASSERT_TRUE(f.ok());
  EXPECT_NEAR(f->hot.speedup_low, 1.05 * 0.99, 1e-9);
  EXPECT_NEAR(f->hot.speedup_high, 1.05 * 1.01, 1e-9);
}

TEST_F(SelectTest, UnverifiedAndFailedMeasurementsDoNotCount) {
  v1::Measurement m = RegimeMeasurement(candidate_, problem_, 10, 10, 20, 20, 1, kVersions);
  m.set_verified(false);
  ASSERT_TRUE(store_->PutMeasurement(m).ok());
  EXPECT_TRUE(absl::IsNotFound(FiguresOf(*store_, problem_, candidate_.id()).status()));
}

TEST(VersionOf, ReadsOneKey) {
  EXPECT_EQ(VersionOf(kVersions, "cublas"), 130100);
  EXPECT_EQ(VersionOf(kVersions, "driver"), 13000);
  EXPECT_EQ(VersionOf(kVersions, "nothing"), 0);
}

}  // namespace
}  // namespace anvil::exporter
