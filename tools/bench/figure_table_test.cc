#include "tools/bench/figure_table.h"

#include "gtest/gtest.h"

namespace memtrace::bench {
namespace {

Figure Ingest(double value, double baseline) {
  Figure f;
  f.section = "ingest";
  f.name = "8 streams";
  f.value = value;
  f.unit = "events/s";
  f.baseline = "db_bench fillseq";
  f.baseline_value = baseline;
  f.target = 1e6;
  f.ratio_target = 0.5;
  return f;
}

TEST(FigureTableTest, RatioIsValueOverBaselineAndAbsentWithoutOne) {
  EXPECT_DOUBLE_EQ(*Ratio(Ingest(3e6, 4e6)), 0.75);
  Figure none = Ingest(3e6, 0);
  EXPECT_FALSE(Ratio(none).has_value());
  none.baseline_value.reset();
  EXPECT_FALSE(Ratio(none).has_value());
}

TEST(FigureTableTest, TargetNeedsBothTheValueAndTheRatio) {
  EXPECT_TRUE(*MeetsTarget(Ingest(3e6, 4e6)));
  EXPECT_FALSE(*MeetsTarget(Ingest(3e6, 7e6)));    // ratio 0.43
  EXPECT_FALSE(*MeetsTarget(Ingest(0.9e6, 1e6)));  // below 1 M
  Figure lower;
  lower.value = 120;
  lower.better = Better::kLower;
  lower.target = 100;
  EXPECT_FALSE(*MeetsTarget(lower));
  lower.value = 80;
  EXPECT_TRUE(*MeetsTarget(lower));
  Figure untargeted;
  EXPECT_FALSE(MeetsTarget(untargeted).has_value());
}

TEST(FigureTableTest, NumbersGetThreeDigitsAndSiSuffixes) {
  EXPECT_EQ(FormatNumber(12'345'678), "12.3 M");
  EXPECT_EQ(FormatNumber(870'000), "870 k");
  EXPECT_EQ(FormatNumber(4.214), "4.21");
  EXPECT_EQ(FormatNumber(0.03123), "0.0312");
  EXPECT_EQ(FormatNumber(2.5e9), "2.50 G");
  EXPECT_EQ(FormatNumber(0), "0");
  EXPECT_EQ(FormatNumber(512), "512");
}

TEST(FigureTableTest, TextTableGroupsBySectionAndShowsRatioAndVerdict) {
  std::string text = RenderText({Ingest(3e6, 4e6), Ingest(3e6, 7e6)});
  EXPECT_NE(text.find("[ingest]"), std::string::npos);
  EXPECT_NE(text.find("0.75x"), std::string::npos);
  EXPECT_NE(text.find("yes"), std::string::npos);
  EXPECT_NE(text.find("NO"), std::string::npos);
  EXPECT_EQ(text.find("[ingest]"), text.rfind("[ingest]"));  // one header per section
}

TEST(FigureTableTest, MarkdownEscapesPipesAndHasOneRowPerFigure) {
  Figure f = Ingest(3e6, 4e6);
  f.note = "a | b";
  std::string md = RenderMarkdown({f, f});
  EXPECT_NE(md.find("a \\| b"), std::string::npos);
  size_t rows = 0;
  for (char c : md) rows += c == '\n';
  EXPECT_EQ(rows, 4u);  // header, separator, two figures
}

}  // namespace
}  // namespace memtrace::bench
