#include "tools/bench/svg_plot.h"

#include "gtest/gtest.h"

namespace memtrace::bench {
namespace {

size_t Count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

TEST(SvgPlotTest, EachSeriesIsOnePolylineWithOneMarkerPerPoint) {
  Panel p;
  p.title = "ingest";
  p.series.push_back({"events/s", {{8, 3e6}, {64, 2.5e6}, {512, 1.8e6}, {1024, 1.5e6}}});
  p.series.push_back({"db_bench", {{8, 5e6}, {64, 5e6}}});
  std::string svg = RenderSvg("scaling", {p});
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_EQ(Count(svg, "<polyline"), 2u);
  EXPECT_EQ(Count(svg, "<circle"), 6u);
  EXPECT_NE(svg.find(">db_bench<"), std::string::npos);
}

TEST(SvgPlotTest, NonPositivePointsAreSkippedOnLogAxes) {
  Panel p;
  p.series.push_back({"q", {{0, 5}, {8, 0}, {8, 4}, {64, 9}}});
  std::string svg = RenderSvg("t", {p});
  EXPECT_EQ(Count(svg, "<circle"), 2u);
}

TEST(SvgPlotTest, TextIsEscapedAndPanelsSitSideBySide) {
  Panel a, b;
  a.title = "a<b & \"c\"";
  b.title = "second";
  std::string svg = RenderSvg("x", {a, b}, 400, 300);
  EXPECT_NE(svg.find("a&lt;b &amp; &quot;c&quot;"), std::string::npos);
  EXPECT_NE(svg.find("width=\"800\""), std::string::npos);
  EXPECT_EQ(Count(svg, "no data"), 2u);
}

}  // namespace
}  // namespace memtrace::bench
