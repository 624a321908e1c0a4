#include "agent/cupti/sampler.h"

#include <unistd.h>

#include <cstdio>
#include <memory>
#include <vector>

#include "absl/time/clock.h"
#include "agent/cupti/testing/recording_sink.h"
#include "gtest/gtest.h"

namespace memtrace {
namespace cupti {
namespace {

TEST(HostRssTest, ParsesResidentPagesTimesPageSize) {
  auto rss = ParseStatmRssBytes("123456 7890 1234 10 0 5000 0\n", 4096);
  ASSERT_TRUE(rss.ok()) << rss.status();
  EXPECT_EQ(*rss, uint64_t{7890} * 4096);
}

TEST(HostRssTest, RejectsTextWithoutResidentField) {
  EXPECT_FALSE(ParseStatmRssBytes("", 4096).ok());
  EXPECT_FALSE(ParseStatmRssBytes("123", 4096).ok());
  auto bad = ParseStatmRssBytes("garbage here", 4096);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("garbage"), std::string::npos);
}

TEST(HostRssTest, RealProcessRssGrowsWhenMemoryIsTouched) {
  auto before = ReadHostRssBytes();
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_GT(*before, 0u);
  // Touch 64 MiB so the resident set grows by about that much.
  constexpr size_t kBytes = 64 << 20;
  auto block = std::make_unique<char[]>(kBytes);
  for (size_t i = 0; i < kBytes; i += 4096) block[i] = static_cast<char>(i);
  auto after = ReadHostRssBytes();
  ASSERT_TRUE(after.ok());
  EXPECT_GE(*after, *before + kBytes / 2);
  EXPECT_EQ(block[4096], static_cast<char>(4096));
}

TEST(HostRssTest, MissingFileIsUnavailable) {
  auto r = ReadHostRssBytes("/nonexistent/statm");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
}

class FixedDevices : public DeviceMemorySource {
 public:
  std::vector<DeviceMemory> Read() override {
    return {{0, 30ull << 30, 140ull << 30}, {1, 100ull << 30, 140ull << 30}};
  }
};

TEST(SamplerTest, OneRoundEmitsADeviceSamplePerDeviceAndAHostSample) {
  RecordingSink sink;
  FixedDevices devices;
  Sampler sampler(&sink, &devices, SamplerOptions(), [] { return 77; });
  sampler.SampleOnce();
  std::vector<Event> dev = sink.EventsOfKind(EventKind::kDeviceSample);
  ASSERT_EQ(dev.size(), 2u);
  EXPECT_EQ(dev[0].device, 0u);
  EXPECT_EQ(dev[0].bytes, 110ull << 30);
  EXPECT_EQ(dev[0].aux, 140ull << 30);
  EXPECT_EQ(dev[1].bytes, 40ull << 30);
  EXPECT_EQ(dev[1].ts_ns, 77);
  std::vector<Event> host = sink.EventsOfKind(EventKind::kHostSample);
  ASSERT_EQ(host.size(), 1u);
  EXPECT_GT(host[0].bytes, 0u);
}

TEST(SamplerTest, HostOnlyWithoutDevicesAndCountsReadErrors) {
  RecordingSink sink;
  SamplerOptions options;
  options.statm_path = "/nonexistent";
  Sampler sampler(&sink, nullptr, options, [] { return 1; });
  sampler.SampleOnce();
  EXPECT_TRUE(sink.events().empty());
  EXPECT_EQ(sampler.host_read_errors(), 1u);
}

TEST(SamplerTest, ThreadSamplesPeriodicallyAndStopsPromptly) {
  RecordingSink sink;
  SamplerOptions options;
  options.period = absl::Milliseconds(10);
  Sampler sampler(&sink, nullptr, options, [] { return RealtimeNanos(); });
  sampler.Start();
  sampler.Start();  // idempotent
  absl::SleepFor(absl::Milliseconds(120));
  const absl::Time stop_begin = absl::Now();
  sampler.Stop();
  EXPECT_LT(absl::Now() - stop_begin, absl::Milliseconds(100));
  const uint64_t rounds = sampler.rounds();
  EXPECT_GE(rounds, 4u);
  EXPECT_LE(rounds, 20u);
  absl::SleepFor(absl::Milliseconds(30));
  EXPECT_EQ(sampler.rounds(), rounds);  // nothing after Stop
  EXPECT_EQ(sink.EventsOfKind(EventKind::kHostSample).size(), rounds);
}

}  // namespace
}  // namespace cupti
}  // namespace memtrace
