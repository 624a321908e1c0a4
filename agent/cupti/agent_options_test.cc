#include "agent/cupti/agent_options.h"

#include "gtest/gtest.h"

namespace memtrace {
namespace cupti {
namespace {

TEST(AgentOptionsTest, EmptyEnvironmentGivesDefaults) {
  ParsedAgentOptions p = ParseAgentOptions(MapEnvironment({}));
  EXPECT_TRUE(p.warnings.empty());
  EXPECT_FALSE(p.options.disabled);
  EXPECT_EQ(p.options.sample_ms, 100);
  EXPECT_TRUE(p.options.subscribe);
  EXPECT_EQ(p.options.source, SourceMode::kBacktrace);
  EXPECT_FALSE(p.options.full_stacks);
  EXPECT_EQ(p.options.buffer_bytes, size_t{4} << 20);
  EXPECT_EQ(p.options.max_buffers, 8u);
  EXPECT_EQ(p.options.ranges.step_prefixes.size(), 3u);
  EXPECT_EQ(p.options.ranges.phase_names.size(), 9u);
}

TEST(AgentOptionsTest, ReadsEverySetting) {
  ParsedAgentOptions p = ParseAgentOptions(MapEnvironment({
      {"MEMTRACE_DISABLE", "0"},
      {"MEMTRACE_SAMPLE_MS", "250"},
      {"MEMTRACE_SUBSCRIBE", "off"},
      {"MEMTRACE_SOURCE", "CUPTI"},
      {"MEMTRACE_STACKS", "1"},
      {"MEMTRACE_STACK_DEPTH", "64"},
      {"MEMTRACE_SOURCE_SKIP", "libc10_cuda, libtorch_cuda"},
      {"MEMTRACE_STEP_PREFIXES", "global_step"},
      {"MEMTRACE_PHASES", "gen,update_actor"},
      {"MEMTRACE_PHASE_PREFIX", "ph/"},
      {"MEMTRACE_CUPTI_BUFFER_KB", "1024"},
      {"MEMTRACE_CUPTI_BUFFERS", "4"},
      {"MEMTRACE_FLUSH_MS", "0"},
      {"MEMTRACE_SHUTDOWN_TIMEOUT_MS", "500"},
  }));
  EXPECT_TRUE(p.warnings.empty()) << p.warnings[0];
  const AgentOptions& o = p.options;
  EXPECT_EQ(o.sample_ms, 250);
  EXPECT_FALSE(o.subscribe);
  EXPECT_EQ(o.source, SourceMode::kCupti);
  EXPECT_TRUE(o.full_stacks);
  EXPECT_EQ(o.stack_depth, 64);
  EXPECT_EQ(o.source_skip, (std::vector<std::string>{"libc10_cuda", "libtorch_cuda"}));
  EXPECT_EQ(o.ranges.step_prefixes, (std::vector<std::string>{"global_step"}));
  EXPECT_EQ(o.ranges.phase_names, (std::vector<std::string>{"gen", "update_actor"}));
  EXPECT_EQ(o.ranges.phase_prefix, "ph/");
  EXPECT_EQ(o.buffer_bytes, size_t{1} << 20);
  EXPECT_EQ(o.max_buffers, 4u);
  EXPECT_EQ(o.flush_ms, 0);
  EXPECT_EQ(o.shutdown_timeout_ms, 500);
}

TEST(AgentOptionsTest, BadValuesKeepDefaultsAndNameTheVariable) {
  ParsedAgentOptions p = ParseAgentOptions(MapEnvironment({
      {"MEMTRACE_SAMPLE_MS", "fast"},
      {"MEMTRACE_STACKS", "maybe"},
      {"MEMTRACE_SOURCE", "gdb"},
      {"MEMTRACE_CUPTI_BUFFERS", "0"},
      {"MEMTRACE_STEP_REGEX", "step ("},
  }));
  ASSERT_EQ(p.warnings.size(), 5u);
  EXPECT_NE(p.warnings[0].find("MEMTRACE_SAMPLE_MS=\"fast\""), std::string::npos) << p.warnings[0];
  EXPECT_EQ(p.options.sample_ms, 100);
  EXPECT_FALSE(p.options.full_stacks);
  EXPECT_EQ(p.options.source, SourceMode::kBacktrace);
  EXPECT_EQ(p.options.max_buffers, 8u);
  EXPECT_TRUE(p.options.ranges.step_regex.empty());
}

TEST(AgentOptionsTest, EmptyPhaseListMeansNoPhaseNames) {
  ParsedAgentOptions p = ParseAgentOptions(MapEnvironment({{"MEMTRACE_PHASES", ""}}));
  EXPECT_TRUE(p.options.ranges.phase_names.empty());
  EXPECT_EQ(p.options.ranges.phase_prefix, "phase:");
}

}  // namespace
}  // namespace cupti
}  // namespace memtrace
