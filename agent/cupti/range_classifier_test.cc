#include "agent/cupti/range_classifier.h"

#include "gtest/gtest.h"

namespace memtrace {
namespace cupti {
namespace {

RangeClassifier Default() {
  auto c = RangeClassifier::Create(RangeClassifierOptions());
  EXPECT_TRUE(c.ok()) << c.status();
  return *std::move(c);
}

TEST(RangeClassifierTest, DefaultStepPatternsParseTheNumber) {
  RangeClassifier c = Default();
  EXPECT_EQ(c.ParseStep("step 12"), 12u);
  EXPECT_EQ(c.ParseStep("STEP 0"), 0u);
  EXPECT_EQ(c.ParseStep("step12"), 12u);
  EXPECT_EQ(c.ParseStep("step_7"), 7u);
  EXPECT_EQ(c.ParseStep("iteration 3"), 3u);
  EXPECT_EQ(c.ParseStep("Iteration:41 "), 41u);
  EXPECT_EQ(c.ParseStep("ProfilerStep#5"), 5u);
  EXPECT_EQ(c.ParseStep("profilerstep#18446744073709551615"), 18446744073709551615u);
}

TEST(RangeClassifierTest, NamesThatOnlyLookLikeStepsAreNotSteps) {
  RangeClassifier c = Default();
  EXPECT_FALSE(c.ParseStep("step"));
  EXPECT_FALSE(c.ParseStep("steps 5"));
  EXPECT_FALSE(c.ParseStep("step 5 forward"));
  EXPECT_FALSE(c.ParseStep("train step 5"));
  EXPECT_FALSE(c.ParseStep("step -1"));
  EXPECT_FALSE(c.ParseStep("step 123456789012345678901"));  // does not fit 64 bits
  EXPECT_FALSE(c.ParseStep(""));
}

TEST(RangeClassifierTest, PhasesByListAndByPrefix) {
  RangeClassifier c = Default();
  RangeClass r = c.Classify("Rollout");
  EXPECT_EQ(r.kind, RangeClass::Kind::kPhase);
  EXPECT_EQ(r.phase, "rollout");
  r = c.Classify("phase:my_custom");
  EXPECT_EQ(r.kind, RangeClass::Kind::kPhase);
  EXPECT_EQ(r.phase, "my_custom");
  EXPECT_EQ(c.Classify("phase:").kind, RangeClass::Kind::kTag);
  EXPECT_EQ(c.Classify("rollout_buffer").kind, RangeClass::Kind::kTag);
}

TEST(RangeClassifierTest, EverythingElseIsATag) {
  RangeClassifier c = Default();
  EXPECT_EQ(c.Classify("fsdp:layers.12").kind, RangeClass::Kind::kTag);
  EXPECT_EQ(c.Classify("leak:cache").kind, RangeClass::Kind::kTag);
  RangeClass s = c.Classify("step 9");
  EXPECT_EQ(s.kind, RangeClass::Kind::kStep);
  EXPECT_EQ(s.step, 9u);
}

TEST(RangeClassifierTest, CustomPrefixesReplaceTheDefaults) {
  RangeClassifierOptions o;
  o.step_prefixes = {"global_step"};
  o.phase_names = {"gen"};
  auto c = RangeClassifier::Create(o);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->ParseStep("global_step=10"), 10u);
  EXPECT_FALSE(c->ParseStep("step 10"));
  EXPECT_EQ(c->Classify("GEN").kind, RangeClass::Kind::kPhase);
  EXPECT_EQ(c->Classify("rollout").kind, RangeClass::Kind::kTag);
}

TEST(RangeClassifierTest, RegexOverridesPrefixes) {
  RangeClassifierOptions o;
  o.step_regex = R"(train/(\d+)/fwd)";
  auto c = RangeClassifier::Create(o);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->ParseStep("TRAIN/33/fwd"), 33u);
  EXPECT_FALSE(c->ParseStep("step 3"));
}

// libstdc++'s std::regex recurses once per character: a long range name (a shape-annotated
// emit_nvtx name, a pasted prompt) matched on the application's thread overflowed its stack.
TEST(RangeClassifierTest, RegexLeavesOverlongNamesAsTags) {
  RangeClassifierOptions o;
  o.step_regex = R"(step[^0-9]*(\d+).*)";
  auto c = RangeClassifier::Create(o);
  ASSERT_TRUE(c.ok()) << c.status();
  const std::string longest = "step 7 " + std::string(kMaxStepRegexNameBytes - 7, 'x');
  ASSERT_EQ(longest.size(), kMaxStepRegexNameBytes);
  EXPECT_EQ(c->ParseStep(longest), 7u);
  EXPECT_FALSE(c->ParseStep(longest + "x"));
  const std::string huge = "step 7 " + std::string(4 << 20, 'x');
  EXPECT_EQ(c->Classify(huge).kind, RangeClass::Kind::kTag);
}

TEST(RangeClassifierTest, BadRegexIsAnErrorNamingThePattern) {
  RangeClassifierOptions o;
  o.step_regex = "step (";
  auto c = RangeClassifier::Create(o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("step ("), std::string::npos);
  o.step_regex = "step \\d+";
  c = RangeClassifier::Create(o);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("capture group"), std::string::npos);
}

}  // namespace
}  // namespace cupti
}  // namespace memtrace
