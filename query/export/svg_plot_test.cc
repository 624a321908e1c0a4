#include "query/export/svg_plot.h"

#include <algorithm>
#include <map>
#include <regex>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "query/analysis/diverged.h"
#include "query/analysis/sim/job_simulator.h"
#include "query/analysis/sim/scenarios.h"
#include "query/analysis/units.h"
#include "query/export/svg_test_util.h"

namespace memtrace::exporter {
namespace {

using testing::Attributes;
using testing::Elements;
using testing::Root;

std::string Plot(const analysis::JobTimeline& job, PlotOptions options = {}) {
  return RenderMemoryPlot(job, MarksFromAnalyses(job), options);
}

TEST(SvgPlotTest, HighlightsThePlantedLeakingRankAndMarksItsOnset) {
  analysis::sim::SimulatedJob job = analysis::sim::Simulate(analysis::sim::LeakJob(5, 30));
  std::string svg = Plot(job.timeline);
  Attributes root = Root(svg);
  EXPECT_EQ(root["data-highlighted-rank"], "5");
  EXPECT_EQ(root["data-status"], "diverged");
  EXPECT_EQ(root["data-ranks"], "8");
  EXPECT_EQ(root["data-metric"], "live");
  int onset = std::stoi(root["data-onset-step"]);
  EXPECT_GE(onset, 30);
  EXPECT_LE(onset, 40);

  std::vector<Attributes> lines = Elements(svg, "polyline", "rank-line");
  ASSERT_EQ(lines.size(), 8u);
  int highlighted = 0;
  for (Attributes& line : lines) {
    EXPECT_EQ(line["data-points"], "100");
    if (line["data-highlighted"] == "true") {
      ++highlighted;
      EXPECT_EQ(line["data-rank"], "5");
      EXPECT_EQ(line["stroke"], "#d62728");
    }
  }
  EXPECT_EQ(highlighted, 1);
  EXPECT_EQ(lines.back()["data-rank"], "5");  // drawn last, on top

  std::vector<Attributes> onsets = Elements(svg, "line", "onset");
  ASSERT_FALSE(onsets.empty());
  EXPECT_NE(onsets[0]["data-kind"].find("divergence"), std::string::npos);
  EXPECT_EQ(onsets[0]["data-rank"], "5");
  EXPECT_EQ(onsets[0]["data-onset-step"], root["data-onset-step"]);
  bool leak_marked = false;
  for (Attributes& o : onsets) {
    leak_marked |= o["data-rank"] == "5" && o["data-kind"].find("leak") != std::string::npos;
  }
  EXPECT_TRUE(leak_marked) << svg.substr(0, 2000);
  EXPECT_NE(svg.find("rank 5 diverges at step"), std::string::npos);
  // The label of the onset line gives the gap at the onset, then the gap it grew to.
  const analysis::DivergenceReport divergence = analysis::FindDivergence(job.timeline);
  ASSERT_FALSE(divergence.diverged.empty());
  const analysis::RankDivergence& d = divergence.diverged.front();
  ASSERT_LT(d.excess_bytes, d.last_excess_bytes);
  EXPECT_NE(svg.find(absl::StrCat("rank 5 diverges at step ", d.onset_step, " (",
                                  analysis::FormatSignedBytes(d.excess_bytes), " vs cohort, ",
                                  analysis::FormatSignedBytes(d.last_excess_bytes), " at step ",
                                  d.last_step, ")")),
            std::string::npos)
      << svg.substr(0, 3000);

  std::vector<Attributes> legend = Elements(svg, "g", "legend-entry");
  ASSERT_EQ(legend.size(), 8u);
  EXPECT_EQ(legend[0]["data-rank"], "5");
  EXPECT_EQ(legend[0]["data-highlighted"], "true");
  EXPECT_EQ(legend[1]["data-rank"], "0");
}

// Found by a user: a long onset label ran past the plot into the legend. Where the whole label
// fits on neither side of its line, the divergence's leaves out the gap it grew to; every
// label stays inside the plot (at about 6.8 px a character).
TEST(SvgPlotTest, OnsetLabelsStayInsideThePlot) {
  const analysis::JobTimeline job = analysis::sim::Simulate(analysis::sim::LeakJob(5, 30)).timeline;
  PlotOptions narrow;
  narrow.width = 900;  // a plot 600 px wide
  const std::string svg = Plot(job, narrow);
  const analysis::RankDivergence d = analysis::FindDivergence(job).diverged.front();
  EXPECT_NE(svg.find(absl::StrCat("rank 5 diverges at step ", d.onset_step, " (",
                                  analysis::FormatSignedBytes(d.excess_bytes), " vs cohort)<")),
            std::string::npos)
      << svg.substr(0, 4000);
  const std::regex label(
      R"re(class="onset-label" data-rank="\d+" x="([0-9.]+)" y="[0-9.]+" fill="#[0-9a-f]+" )re"
      R"re(text-anchor="(start|end)">([^<]*)<)re");
  int labels = 0;
  for (std::sregex_iterator it(svg.begin(), svg.end(), label), end; it != end; ++it, ++labels) {
    const double x = std::stod((*it)[1]);
    const double width = 6.8 * static_cast<double>((*it)[3].length());
    if ((*it)[2] == "start") {
      EXPECT_LE(x + width, 90 + 600) << (*it)[3];
    } else {
      EXPECT_GE(x - width, 90) << (*it)[3];
    }
  }
  EXPECT_GE(labels, 1);
}

// A leak from step 1, inside warm-up, was labelled "from step 5" as if it began there.
TEST(SvgPlotTest, ALeakFromTheFirstExaminedStepSaysItMayHaveBegunEarlier) {
  std::string svg = Plot(analysis::sim::Simulate(analysis::sim::LeakJob(3, 1)).timeline);
  EXPECT_NE(svg.find("the first step examined after warm-up: it may have begun earlier"),
            std::string::npos)
      << svg.substr(0, 3000);
  std::string late = Plot(analysis::sim::Simulate(analysis::sim::LeakJob(5, 30)).timeline);
  EXPECT_EQ(late.find("may have begun earlier"), std::string::npos);
  // Flat at the first step examined and rising after it, labelled "from step 5" as well. (The
  // divergence's label may still say the rank drifted from the first step it compared.)
  std::string flat_first = Plot(analysis::sim::Simulate(analysis::sim::LeakJob(3, 5)).timeline);
  const size_t label = flat_first.find("leak on rank 3 from step 5 (");
  ASSERT_NE(label, std::string::npos) << flat_first.substr(0, 3000);
  const std::string leak_label = flat_first.substr(label, flat_first.find('<', label) - label);
  EXPECT_EQ(leak_label.find("examined after warm-up"), std::string::npos) << leak_label;
}

// Without step markers the leak's rate is per unit of time: the label said "128 MiB/step", then
// "/bucket", which read as the analyses' windows in `memtrace leaks` and as the buckets drawn
// here.
TEST(SvgPlotTest, ALeakWithoutStepMarkersIsLabelledPerSecond) {
  analysis::JobTimeline job =
      analysis::sim::Simulate(analysis::sim::LeakJob(5, 30, 128 * analysis::kMiB)).timeline;
  job.time_axis = true;
  job.bucket_ns = 1'000'000'000;
  for (analysis::RankTimeline& r : job.ranks) {
    for (analysis::StepPoint& p : r.steps) p.step += 1'796'000'000;
  }
  std::string svg = Plot(job);
  EXPECT_NE(svg.find("(128 MiB/s)"), std::string::npos) << svg.substr(0, 3000);
  EXPECT_EQ(svg.find("/step"), std::string::npos) << svg.substr(0, 3000);
  EXPECT_EQ(svg.find("/bucket"), std::string::npos) << svg.substr(0, 3000);
}

// 10 s steps in 1 s buckets: the marks come from the analyses over windows of whole steps, as the
// collector's do, placed back on the buckets plotted, at the leak's own rate per bucket, and
// labelled with the buckets' times.
TEST(SvgPlotTest, LongStepsWithoutMarkersAreMarkedFromWindowsOfWholeSteps) {
  constexpr int64_t kFirstBucket = 1'796'536'003;
  const analysis::JobTimeline job = analysis::sim::StretchedIntoBuckets(
      analysis::sim::Simulate(analysis::sim::LeakJob(5, 30, 256 * analysis::kMiB)).timeline, 10,
      14 * analysis::kGiB, kFirstBucket);
  const PlotMarks marks = MarksFromAnalyses(job, /*step_windows=*/true);
  ASSERT_EQ(marks.highlighted_rank, 5u) << marks.message;
  const int64_t leak_bucket = kFirstBucket + 30 * 10;
  EXPECT_LE(std::abs(marks.onset_step - leak_bucket), 5 * 10) << marks.onset_step;
  ASSERT_EQ(marks.leaks.size(), 1u);
  EXPECT_EQ(marks.leaks[0].rank, 5u);
  EXPECT_LE(std::abs(marks.leaks[0].since_step - leak_bucket), 2 * 10);
  EXPECT_NEAR(marks.leaks[0].bytes_per_step, 25.6 * analysis::kMiB, 2.0 * analysis::kMiB);
  const std::string svg = RenderMemoryPlot(job, marks, PlotOptions{});
  // At the bucket's clock time, as the ticks read (the axis title names the day).
  EXPECT_NE(svg.find("rank 5 diverges at 05:5"), std::string::npos) << svg.substr(0, 3000);
  EXPECT_NE(svg.find("(25.6 MiB/s)"), std::string::npos) << svg.substr(0, 3000);
  // The divergence's sentence counts the analyses' windows, which it says.
  EXPECT_NE(svg.find("(its buckets: the analyses&apos; 10 s windows of the buckets drawn)"),
            std::string::npos)
      << svg.substr(0, 3000);
}

// A bucket's key is its start in ns since the epoch / bucket_ns. On a time axis it is written
// under bucket attributes and labelled as a clock time: read as a step it was "step 1796536303".
TEST(SvgPlotTest, ATimeAxisLabelsClockTimesAndNamesItsKeysBuckets) {
  constexpr int64_t kFirstBucket = 1'796'536'003;  // 2026-12-06 05:46:43 UTC
  const analysis::JobTimeline job = analysis::sim::StretchedIntoBuckets(
      analysis::sim::Simulate(analysis::sim::LeakJob(5, 30, 256 * analysis::kMiB)).timeline, 10,
      14 * analysis::kGiB, kFirstBucket);
  const PlotMarks marks = MarksFromAnalyses(job, /*step_windows=*/true);
  ASSERT_EQ(marks.highlighted_rank, 5u) << marks.message;
  const std::string svg = RenderMemoryPlot(job, marks, PlotOptions{});
  Attributes root = Root(svg);
  EXPECT_EQ(root["data-axis"], "time");
  EXPECT_EQ(root["data-bucket-ns"], "1000000000");
  EXPECT_EQ(root.count("data-onset-step"), 0u);
  EXPECT_EQ(root["data-onset-bucket"], std::to_string(marks.onset_step));
  for (Attributes& o : Elements(svg, "line", "onset")) {
    EXPECT_EQ(o.count("data-onset-step"), 0u);
    EXPECT_GE(std::stoll(o["data-onset-bucket"]), kFirstBucket);
  }
  // About 1000 s of buckets: ticks every 2 minutes, on the minute, labelled as UTC times.
  std::vector<Attributes> ticks;
  for (Attributes& t : Elements(svg, "text", "tick")) {
    EXPECT_EQ(t.count("data-step"), 0u);
    if (t.count("data-bucket")) ticks.push_back(t);
  }
  ASSERT_GE(ticks.size(), 4u);
  ASSERT_LE(ticks.size(), 10u);
  EXPECT_EQ(std::stoll(ticks[0]["data-bucket"]) % 120, 0);
  EXPECT_EQ(std::stoll(ticks[1]["data-bucket"]) - std::stoll(ticks[0]["data-bucket"]), 120);
  EXPECT_NE(svg.find(">05:48:00</text>"), std::string::npos) << svg.substr(0, 4000);
  EXPECT_NE(svg.find(">time, UTC, from 2026-12-06 05:46:43 (1s buckets)</text>"), std::string::npos)
      << svg.substr(0, 4000);
}

// On steps, the keys keep their step names.
TEST(SvgPlotTest, AStepAxisWritesStepAttributes) {
  const std::string svg =
      Plot(analysis::sim::Simulate(analysis::sim::LeakJob(5, 30, 128 * analysis::kMiB)).timeline);
  Attributes root = Root(svg);
  EXPECT_EQ(root["data-axis"], "step");
  EXPECT_EQ(root["data-bucket-ns"], "0");
  EXPECT_EQ(root.count("data-onset-bucket"), 0u);
  EXPECT_FALSE(root["data-onset-step"].empty());
}

TEST(SvgPlotTest, AHealthyJobHighlightsNobody) {
  analysis::sim::SimulatedJob job = analysis::sim::Simulate(analysis::sim::HealthyJob());
  std::string svg = Plot(job.timeline);
  Attributes root = Root(svg);
  EXPECT_EQ(root["data-highlighted-rank"], "");
  EXPECT_EQ(root["data-status"], "none");
  for (Attributes& line : Elements(svg, "polyline", "rank-line")) {
    EXPECT_EQ(line["data-highlighted"], "false");
  }
  EXPECT_TRUE(Elements(svg, "line", "onset").empty());
}

TEST(SvgPlotTest, AxesHaveGibAndStepTicks) {
  analysis::sim::SimulatedJob job = analysis::sim::Simulate(analysis::sim::LeakJob());
  std::string svg = Plot(job.timeline);
  std::vector<Attributes> ticks = Elements(svg, "text", "tick");
  std::vector<double> gib, steps;
  for (Attributes& t : ticks) {
    if (t.count("data-gib")) gib.push_back(std::stod(t["data-gib"]));
    if (t.count("data-step")) steps.push_back(std::stod(t["data-step"]));
  }
  ASSERT_GE(gib.size(), 4u);
  ASSERT_LE(gib.size(), 11u);
  EXPECT_EQ(gib.front(), 0);
  // The top tick is above the highest value drawn.
  uint64_t max_bytes = 0;
  for (Attributes& line : Elements(svg, "polyline", "rank-line")) {
    max_bytes = std::max<uint64_t>(max_bytes, std::stoull(line["data-max-bytes"]));
  }
  EXPECT_GE(gib.back() * analysis::kGiB, max_bytes);
  ASSERT_GE(steps.size(), 4u);
  EXPECT_EQ(steps.front(), 0);
  EXPECT_LE(steps.back(), 99);
  EXPECT_NE(svg.find(">10 GiB<"), std::string::npos);
}

TEST(SvgPlotTest, RanksOptionDrawsOnlyThoseRanksButKeepsTheCohortsAnswer) {
  analysis::sim::SimulatedJob job = analysis::sim::Simulate(analysis::sim::LeakJob(5, 30));
  PlotOptions options;
  options.ranks = {0, 1, 5};
  options.metric = analysis::Metric::kFloor;
  std::string svg = Plot(job.timeline, options);
  std::vector<Attributes> lines = Elements(svg, "polyline", "rank-line");
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(Root(svg)["data-metric"], "floor");
  EXPECT_EQ(Root(svg)["data-highlighted-rank"], "5");
  options.ranks = {0, 1};
  svg = Plot(job.timeline, options);
  for (Attributes& line : Elements(svg, "polyline", "rank-line")) {
    EXPECT_EQ(line["data-highlighted"], "false");
  }
}

// Past 4 points per pixel column a line is drawn through each column's first, lowest, highest
// and last point: the same picture from a fraction of the vertices.
TEST(DrawnPointsTest, KeepEachColumnsFirstLowestHighestAndLast) {
  std::vector<std::pair<int64_t, uint64_t>> points;
  for (int64_t k = 0; k < 20'000; ++k) points.push_back({k, 100 + static_cast<uint64_t>(k % 7)});
  points[777].second = 0;          // a dip
  points[12'345].second = 10'000;  // a spike
  constexpr int kColumns = 1000;
  const std::vector<size_t> drawn = DrawnPoints(points, 0, 19'999, kColumns);
  EXPECT_LE(drawn.size(), 4u * (kColumns + 1));
  EXPECT_GE(drawn.size(), 2u * kColumns);
  EXPECT_TRUE(std::is_sorted(drawn.begin(), drawn.end()));
  EXPECT_EQ(drawn.front(), 0u);
  EXPECT_EQ(drawn.back(), points.size() - 1);
  EXPECT_NE(std::find(drawn.begin(), drawn.end(), 777u), drawn.end());
  EXPECT_NE(std::find(drawn.begin(), drawn.end(), 12'345u), drawn.end());
  // Every column keeps its extremes: 20 points a column.
  std::map<int64_t, std::pair<uint64_t, uint64_t>> all, kept;  // column -> (lowest, highest)
  const auto add = [](std::map<int64_t, std::pair<uint64_t, uint64_t>>& m, int64_t c, uint64_t v) {
    auto [it, inserted] = m.try_emplace(c, v, v);
    it->second.first = std::min(it->second.first, v);
    it->second.second = std::max(it->second.second, v);
  };
  for (const auto& [key, value] : points) add(all, key * kColumns / 19'999, value);
  for (size_t i : drawn) add(kept, points[i].first * kColumns / 19'999, points[i].second);
  EXPECT_EQ(kept, all);
  // At most 4 a column: every point.
  points.resize(4 * kColumns);
  EXPECT_EQ(DrawnPoints(points, 0, 4 * kColumns - 1, kColumns).size(), points.size());
}

TEST(SvgPlotTest, ALongTimeAxisIsDrawnThroughAFewVerticesPerPixel) {
  // 100 steps of 100 buckets: 10,000 a rank on a plot 1,200 wide.
  const analysis::JobTimeline job = analysis::sim::StretchedIntoBuckets(
      analysis::sim::Simulate(analysis::sim::LeakJob(5, 30, 256 * analysis::kMiB)).timeline, 100,
      14 * analysis::kGiB, 1'796'536'003);
  const std::string svg = Plot(job);
  std::vector<Attributes> lines = Elements(svg, "polyline", "rank-line");
  ASSERT_EQ(lines.size(), 8u);
  for (Attributes& line : lines) {
    EXPECT_EQ(line["data-points"], "10000");
    const size_t vertices = std::count(line["points"].begin(), line["points"].end(), ',');
    EXPECT_LE(vertices, 4u * 1200);
    EXPECT_GE(vertices, 1000u);
  }
  EXPECT_LT(svg.size(), 8u * 4 * 1200 * 16) << "bytes";
}

TEST(SvgPlotTest, PeakMetricPlotsPeaks) {
  analysis::sim::SimulatedJob job = analysis::sim::Simulate(analysis::sim::HealthyJob(3, 20));
  PlotOptions peak;
  peak.metric = analysis::Metric::kPeak;
  PlotOptions floor;
  floor.metric = analysis::Metric::kFloor;
  std::string a = Plot(job.timeline, peak);
  std::string b = Plot(job.timeline, floor);
  EXPECT_GT(std::stoull(Elements(a, "polyline", "rank-line")[0]["data-max-bytes"]),
            std::stoull(Elements(b, "polyline", "rank-line")[0]["data-max-bytes"]));
}

TEST(SvgPlotTest, EscapesTextAndSurvivesAnEmptyJob) {
  analysis::JobTimeline job;
  job.job_id = "a<b>&\"c\"";
  std::string svg = Plot(job);
  EXPECT_NE(svg.find("data-job=\"a&lt;b&gt;&amp;&quot;c&quot;\""), std::string::npos) << svg;
  EXPECT_EQ(Root(svg)["data-ranks"], "0");
  EXPECT_EQ(Root(svg)["data-status"], "too-few-ranks");
}

TEST(SvgPlotTest, ParsesMetricNames) {
  EXPECT_EQ(*ParsePlotMetric("live"), analysis::Metric::kEnd);
  EXPECT_EQ(*ParsePlotMetric("floor"), analysis::Metric::kFloor);
  EXPECT_EQ(*ParsePlotMetric("peak"), analysis::Metric::kPeak);
  EXPECT_FALSE(ParsePlotMetric("max").ok());
}

TEST(TimeTicksTest, FallOnRoundClockTimesInsideTheRange) {
  constexpr int64_t kS = 1'000'000'000;
  // 80 s of 1 s buckets from 03:17:24: every 10 s, from 03:17:30.
  std::vector<double> t = TimeTicks(1'796'613'444, 1'796'613'524, kS);
  ASSERT_EQ(t.size(), 8u);
  EXPECT_EQ(t.front(), 1'796'613'450);
  EXPECT_EQ(t[1] - t[0], 10);
  EXPECT_EQ(TimeKeyLabel(t.front(), kS, t.front(), t.back(), 10 * kS), "03:17:30");
  // 250 ms buckets over 2 s: every 500 ms (two whole buckets), labelled with ms.
  constexpr int64_t kQuarters = int64_t{4} * 1'796'613'444;
  std::vector<double> q = TimeTicks(kQuarters, kQuarters + 8, kS / 4);
  ASSERT_EQ(q.size(), 5u);
  EXPECT_EQ(q[1] - q[0], 2);
  EXPECT_EQ(TimeKeyLabel(q[1], kS / 4, kQuarters, kQuarters + 8, kS / 2), "03:17:24.500");
  // Ticks of whole seconds on 250 ms buckets need no ".000".
  EXPECT_EQ(TimeKeyLabel(kQuarters + 4, kS / 4, kQuarters, kQuarters + 400, 10 * kS), "03:17:25");
  // 3 days of 1 min buckets: every 12 h, with the date.
  const int64_t day0 = 1'796'601'600 / 60;  // 2026-12-07 00:00 UTC, in minutes
  std::vector<double> d = TimeTicks(day0, day0 + 3 * 1440, 60 * kS);
  EXPECT_EQ(d[1] - d[0], 12 * 60);
  EXPECT_EQ(TimeKeyLabel(d[2], 60 * kS, day0, day0 + 3 * 1440, 12 * 3600 * kS), "12-08 00:00");
  // Less than a day, across midnight: dated too ("00:00:00" of which day?).
  EXPECT_EQ(TimeKeyLabel(day0, 60 * kS, day0 - 60, day0 + 60, 10 * 60 * kS), "12-07 00:00");
  EXPECT_EQ(TimeKeyLabel(day0 * 60, kS, day0 * 60 - 30, day0 * 60 + 30, 10 * kS), "12-07 00:00:00");
  // A single bucket still gets a tick.
  EXPECT_EQ(TimeTicks(5, 5, kS), (std::vector<double>{5, 6}));
}

TEST(NiceTicksTest, UsesOneTwoFiveSteps) {
  EXPECT_EQ(NiceTicks(0, 30), (std::vector<double>{0, 5, 10, 15, 20, 25, 30}));
  EXPECT_EQ(NiceTicks(0, 21.7), (std::vector<double>{0, 5, 10, 15, 20, 25}));  // covers the max
  std::vector<double> small = NiceTicks(0, 0.35);
  ASSERT_EQ(small.size(), 8u);
  for (size_t i = 0; i < small.size(); ++i) EXPECT_NEAR(small[i], 0.05 * i, 1e-12);
  std::vector<double> steps = NiceTicks(0, 99);
  EXPECT_EQ(steps.front(), 0);
  EXPECT_EQ(steps[1], 10);
}

}  // namespace
}  // namespace memtrace::exporter
