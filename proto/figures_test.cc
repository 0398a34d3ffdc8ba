#include "proto/figures.h"

#include <gtest/gtest.h>

#include <string>

#include "absl/strings/str_replace.h"

namespace anvil {
namespace {

v1::Baseline* AddBaseline(v1::Measurement& m, const std::string& name, double cold_us) {
  v1::Baseline* b = m.add_baselines();
  b->set_name(name);
  if (cold_us >= 0) MutableFigureStats(b->mutable_timings(), "graph-cold")->set_median_us(cold_us);
  return b;
}

v1::Measurement Passed(double cold_us) {
  v1::Measurement m;
  m.set_verdict(v1::VERDICT_PASSED);
  MutableFigureStats(m.mutable_timings(), "graph-cold")->set_median_us(cold_us);
  return m;
}

// Every TimingStats field of Timings is a figure, named with '-' for '_',
// and each figure reads and writes its own field.
TEST(Figures, NameEveryTimingsFieldOnce) {
  const google::protobuf::Descriptor* d = v1::Timings::descriptor();
  int stats_fields = 0;
  for (int i = 0; i < d->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* f = d->field(i);
    if (f->message_type() != v1::TimingStats::descriptor()) continue;
    ++stats_fields;
    const std::string name = absl::StrReplaceAll(f->name(), {{"_", "-"}});
    EXPECT_TRUE(IsFigure(name)) << name;
    v1::Timings t;
    MutableFigureStats(&t, name)->set_median_us(7);
    EXPECT_TRUE(t.GetReflection()->HasField(t, f)) << name;
    EXPECT_EQ(FigureUs(t, name), 7) << name;
  }
  EXPECT_EQ(stats_fields, static_cast<int>(kFigures.size()));
  EXPECT_EQ(kFigures.front(), kDefaultFigure);
}

TEST(Figures, AbsentOrUnmeasuredFiguresHaveNoStats) {
  v1::Timings t;
  bool has = true;
  EXPECT_NE(FigureField(t, "device", &has), nullptr);
  EXPECT_FALSE(has);
  EXPECT_EQ(FigureStats(t, "device"), nullptr);
  t.mutable_device()->set_samples(3);  // set, but no median
  EXPECT_NE(FigureField(t, "device", &has), nullptr);
  EXPECT_TRUE(has);
  EXPECT_EQ(FigureStats(t, "device"), nullptr);
  EXPECT_EQ(FigureUs(t, "device"), 0);
  EXPECT_EQ(FigureField(t, "graph_cold", &has), nullptr);  // names use '-'
  EXPECT_FALSE(has);
  EXPECT_EQ(MutableFigureStats(&t, "nonsense"), nullptr);
}

TEST(Figures, BestBaselineIsTheFastestWithTheFigureAndTheFirstOfEqualOnes) {
  v1::Measurement m = Passed(10);
  AddBaseline(m, "cublas", 14);
  AddBaseline(m, "cublaslt", -1)->mutable_timings()->mutable_device()->set_median_us(1);
  AddBaseline(m, "cublaslt_auto", 12)->mutable_timings()->mutable_graph_cold()->set_spread(0.03);
  AddBaseline(m, "late_equal", 12);
  const v1::Baseline* b = BestBaseline(m, "graph-cold");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->name(), "cublaslt_auto");
  EXPECT_DOUBLE_EQ(FigureStats(b->timings(), "graph-cold")->spread(), 0.03);
  EXPECT_EQ(BestBaselineUs(m, "graph-cold"), 12);
  EXPECT_DOUBLE_EQ(SpeedupOverBestBaseline(m, "graph-cold"), 1.2);
  EXPECT_EQ(BestBaseline(m, "warm"), nullptr);
  EXPECT_EQ(BestBaselineUs(m, "warm"), 0);
}

TEST(Figures, OnlyPassedMeasurementsRankAndATieKeepsTheIncumbent) {
  v1::Measurement fast = Passed(8), slow = Passed(9), tie = Passed(8);
  v1::Measurement wrong = Passed(1);
  wrong.set_verdict(v1::VERDICT_INCORRECT);
  EXPECT_EQ(RankingUs(wrong, "graph-cold"), 0);
  EXPECT_EQ(RankingUs(fast, "device"), 0);  // not measured by that figure
  EXPECT_TRUE(Beats(fast, slow, "graph-cold"));
  EXPECT_FALSE(Beats(slow, fast, "graph-cold"));
  EXPECT_FALSE(Beats(tie, fast, "graph-cold"));
  EXPECT_FALSE(Beats(wrong, slow, "graph-cold"));
  EXPECT_TRUE(Beats(slow, wrong, "graph-cold"));
  EXPECT_TRUE(Beats(9.0, 0.0));
  EXPECT_FALSE(Beats(0.0, 0.0));
}

}  // namespace
}  // namespace anvil
