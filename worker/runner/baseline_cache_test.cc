#include "worker/runner/baseline_cache.h"

#include <gtest/gtest.h>

namespace anvil::runner {
namespace {

CachedBaselines Entry(double reference_us) {
  CachedBaselines e;
  e.reference_call_us = reference_us;
  e.excess_err = 1e-5;
  v1::Baseline b;
  b.set_name("cublas");
  b.mutable_timings()->mutable_graph_cold()->set_median_us(12.5);
  e.records.push_back(b);
  e.rel_err.push_back(2.1e-4);
  return e;
}

TEST(BaselineCache, FindsAProblemOnlyByItsExactShapeAndLayout) {
  BaselineCache cache;
  EXPECT_EQ(cache.Find(1000, 1000, 1000, v1::LAYOUT_NT), nullptr);
  cache.Put(1000, 1000, 1000, v1::LAYOUT_NT, Entry(9.0));
  const CachedBaselines* got = cache.Find(1000, 1000, 1000, v1::LAYOUT_NT);
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(got->reference_call_us, 9.0);
  ASSERT_EQ(got->records.size(), 1u);
  EXPECT_EQ(got->records[0].timings().graph_cold().median_us(), 12.5);
  EXPECT_EQ(got->rel_err, std::vector<double>{2.1e-4});
  EXPECT_EQ(cache.Find(1000, 1000, 1000, v1::LAYOUT_NN), nullptr);
  EXPECT_EQ(cache.Find(1000, 1000, 1001, v1::LAYOUT_NT), nullptr);
  EXPECT_EQ(cache.Find(1000, 1001, 1000, v1::LAYOUT_NT), nullptr);
  EXPECT_EQ(cache.Find(1001, 1000, 1000, v1::LAYOUT_NT), nullptr);
}

TEST(BaselineCache, APutReplacesTheProblemsEntry) {
  BaselineCache cache;
  cache.Put(64, 64, 64, v1::LAYOUT_NN, Entry(3.0));
  cache.Put(64, 64, 64, v1::LAYOUT_NN, Entry(4.0));
  cache.Put(64, 64, 64, v1::LAYOUT_NT, Entry(5.0));
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.Find(64, 64, 64, v1::LAYOUT_NN)->reference_call_us, 4.0);
  EXPECT_EQ(cache.Find(64, 64, 64, v1::LAYOUT_NT)->reference_call_us, 5.0);
}

}  // namespace
}  // namespace anvil::runner
