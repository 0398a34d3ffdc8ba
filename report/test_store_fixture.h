// The gtest fixture of the report and status page tests: the test search
// (report_test_store.h) in a store of its own temporary folder. Test code only.
#ifndef ANVIL_REPORT_TEST_STORE_FIXTURE_H_
#define ANVIL_REPORT_TEST_STORE_FIXTURE_H_

#include <stdlib.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "report/report_test_store.h"

namespace anvil::report::testing {

// A fixture with the test search in a store of its own folder, removed after.
class TestStoreFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "anvil_report_XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    absl::StatusOr<std::unique_ptr<Store>> store = OpenTestStore(dir_ + "/anvil.db", clock_);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string dir_;
  std::atomic<int64_t> clock_{0};
  std::unique_ptr<Store> store_;
};

}  // namespace anvil::report::testing

#endif  // ANVIL_REPORT_TEST_STORE_FIXTURE_H_
