// Store tests: the best kernel of a problem follows proto/figures.h's rule
// (Beats over rows in measured order) in BestKernel, ListBestKernels and
// GetKernel: of equal medians the first measured wins, whatever the row ids,
// and a figure that was set but not measured (median 0) never wins.
#include "gtest/gtest.h"
#include "store/store.h"
#include "store/store_test_util.h"

namespace anvil {
namespace {

using testing_util::TempDir;
using testing_util::TestCandidate;
using testing_util::TestMeasurement;
using testing_util::TestProblem;

class StoreRankingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(dir_.File("anvil.db"));
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    for (int i = 0; i < 4; ++i) {
      ASSERT_TRUE(store_->PutCandidate(TestCandidate(absl::StrCat("cand", i))).ok());
    }
  }

  // Stores a verified PASSED measurement measured at `measured_at`.
  void Put(int candidate, double device_us, int64_t measured_at) {
    v1::Measurement m = TestMeasurement(absl::StrCat("cand", candidate), problem_, device_us);
    m.set_verified(true);
    m.set_measured_at_unix_ms(measured_at);
    ASSERT_TRUE(store_->PutMeasurement(m).ok());
  }

  TempDir dir_;
  std::unique_ptr<Store> store_;
  const v1::Problem problem_ = TestProblem(4096, 4096, 4096);
};

TEST_F(StoreRankingTest, OfEqualMediansTheFirstMeasuredWins) {
  Put(0, 9.0, 1000);
  Put(1, 7.0, 3000);  // stored before cand2's row, measured after it
  Put(2, 7.0, 2000);
  Put(3, 0.0, 4000);  // device set, median 0: not measured by it
  absl::StatusOr<std::optional<v1::Kernel>> best = store_->BestKernel(problem_, "device");
  ASSERT_TRUE(best.ok()) << best.status();
  ASSERT_TRUE(best->has_value());
  EXPECT_EQ((*best)->candidate().id(), "cand2");
  EXPECT_EQ((*best)->measurement().measured_at_unix_ms(), 2000);
  absl::StatusOr<std::vector<v1::Kernel>> all = store_->ListBestKernels("", v1::LAYOUT_UNSPECIFIED, "device", 0);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].candidate().id(), "cand2");
}

TEST_F(StoreRankingTest, GetKernelAttachesTheFirstMeasuredOfEqualMedians) {
  Put(1, 7.0, 3000);
  Put(1, 7.0, 2000);
  Put(1, 8.0, 1000);
  absl::StatusOr<v1::Kernel> k = store_->GetKernel("cand1", problem_, "device");
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(k->measurement().measured_at_unix_ms(), 2000);
  EXPECT_DOUBLE_EQ(k->measurement().timings().device().median_us(), 7.0);
}

TEST_F(StoreRankingTest, NoRankingRowNoBest) {
  Put(3, 0.0, 1000);
  absl::StatusOr<std::optional<v1::Kernel>> best = store_->BestKernel(problem_, "device");
  ASSERT_TRUE(best.ok()) << best.status();
  EXPECT_FALSE(best->has_value());
  absl::StatusOr<std::vector<v1::Kernel>> all = store_->ListBestKernels("", v1::LAYOUT_UNSPECIFIED, "device", 0);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_TRUE(all->empty());
}

}  // namespace
}  // namespace anvil
