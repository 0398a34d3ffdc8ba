#include "worker/runner/baseline_cache.h"

#include <gtest/gtest.h>

#include "worker/runner/protocol.h"

namespace anvil::runner {
namespace {

v1::ScreenedBaselines Entry(int m, int n, int k, v1::Layout layout, double reference_us) {
  v1::ScreenedBaselines e;
  e.mutable_shape()->set_m(m);
  e.mutable_shape()->set_n(n);
  e.mutable_shape()->set_k(k);
  e.set_layout(layout);
  e.set_figure("graph-cold");
  e.set_reference_call_us(reference_us);
  e.set_excess_err(1e-5);
  v1::Baseline* b = e.add_records();
  b->set_name("cublas");
  b->set_rel_err(2.1e-4);
  b->mutable_timings()->mutable_graph_cold()->set_median_us(12.5);
  return e;
}

TEST(BaselineCache, FindsAProblemOnlyByItsExactShapeAndLayout) {
  BaselineCache cache;
  EXPECT_EQ(cache.Find(1000, 1000, 1000, v1::LAYOUT_NT), nullptr);
  cache.Put(Entry(1000, 1000, 1000, v1::LAYOUT_NT, 9.0), true);
  const v1::ScreenedBaselines* got = cache.Find(1000, 1000, 1000, v1::LAYOUT_NT);
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(got->reference_call_us(), 9.0);
  ASSERT_EQ(got->records_size(), 1);
  EXPECT_EQ(got->records(0).timings().graph_cold().median_us(), 12.5);
  EXPECT_EQ(got->records(0).rel_err(), 2.1e-4);
  EXPECT_EQ(cache.Find(1000, 1000, 1000, v1::LAYOUT_NN), nullptr);
  EXPECT_EQ(cache.Find(1000, 1000, 1001, v1::LAYOUT_NT), nullptr);
  EXPECT_EQ(cache.Find(1000, 1001, 1000, v1::LAYOUT_NT), nullptr);
  EXPECT_EQ(cache.Find(1001, 1000, 1000, v1::LAYOUT_NT), nullptr);
}

TEST(BaselineCache, APutReplacesTheProblemsEntry) {
  BaselineCache cache;
  cache.Put(Entry(64, 64, 64, v1::LAYOUT_NN, 3.0), true);
  cache.Put(Entry(64, 64, 64, v1::LAYOUT_NN, 4.0), true);
  cache.Put(Entry(64, 64, 64, v1::LAYOUT_NT, 5.0), true);
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.Find(64, 64, 64, v1::LAYOUT_NN)->reference_call_us(), 4.0);
  EXPECT_EQ(cache.Find(64, 64, 64, v1::LAYOUT_NT)->reference_call_us(), 5.0);
}

// What the host sent is not sent back; what this process measured is, once.
TEST(BaselineCache, TakeFreshReturnsOnlyWhatThisProcessMeasuredOnce) {
  BaselineCache cache;
  cache.Put(Entry(8, 4096, 4096, v1::LAYOUT_NT, 3.0), false);
  EXPECT_TRUE(cache.TakeFresh().empty());
  cache.Put(Entry(16, 4096, 4096, v1::LAYOUT_NT, 4.0), true);
  std::vector<v1::ScreenedBaselines> fresh = cache.TakeFresh();
  ASSERT_EQ(fresh.size(), 1u);
  EXPECT_EQ(fresh[0].shape().m(), 16);
  EXPECT_TRUE(cache.TakeFresh().empty());
  EXPECT_NE(cache.Find(8, 4096, 4096, v1::LAYOUT_NT), nullptr);
}

// An entry from another process stands in for timing the baselines only
// when it cannot change what this process measures or how it judges: of the
// screen's figure, with that figure on every record and a reference call, and
// with a vendors' error that leaves the accuracy bound at the threshold.
TEST(BaselineCache, AnEntryFromAnotherProcessIsUsableOnlyWhenItCannotLoosenACheck) {
  v1::RunnerProtocol p;
  FillDefaults(p);
  const v1::ScreenedBaselines good = Entry(8, 4096, 4096, v1::LAYOUT_NT, 9.0);
  EXPECT_TRUE(BaselineCache::Usable(good, p, "graph-cold"));
  EXPECT_FALSE(BaselineCache::Usable(good, p, "device")) << "another figure";

  v1::ScreenedBaselines e = good;
  e.set_excess_err(p.rel_err_threshold());  // 1.25x of it would widen the bound
  EXPECT_FALSE(BaselineCache::Usable(e, p, "graph-cold"));
  e.set_excess_err(0.8 * p.rel_err_threshold());  // exactly at the bound: no wider
  EXPECT_TRUE(BaselineCache::Usable(e, p, "graph-cold"));
  e.set_excess_err(-1);
  EXPECT_FALSE(BaselineCache::Usable(e, p, "graph-cold"));

  e = good;
  e.mutable_records(0)->mutable_timings()->clear_graph_cold();
  EXPECT_FALSE(BaselineCache::Usable(e, p, "graph-cold")) << "a record without the figure";
  e = good;
  e.clear_records();
  EXPECT_FALSE(BaselineCache::Usable(e, p, "graph-cold")) << "no records";
  e = good;
  e.set_reference_call_us(0);
  EXPECT_FALSE(BaselineCache::Usable(e, p, "graph-cold")) << "no reference call";
}

}  // namespace
}  // namespace anvil::runner
