#include "agent/stream/string_table.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace memtrace {
namespace {

Event Using(uint32_t tag, uint32_t source = 0) {
  Event e;
  e.kind = EventKind::kAlloc;
  e.tag_id = tag;
  e.source_id = source;
  return e;
}

TEST(StringTableTest, SameKindAndValueGetTheSameIdAndKindsAreSeparate) {
  StringTable t(100);
  const uint32_t a = t.Intern(StringKind::kTag, "layer.0");
  EXPECT_EQ(a, 1u);
  EXPECT_EQ(t.Intern(StringKind::kTag, "layer.0"), a);
  const uint32_t b = t.Intern(StringKind::kPhase, "layer.0");
  EXPECT_NE(b, a);
  EXPECT_EQ(t.size(), 2u);
}

TEST(StringTableTest, RefusesBeyondTheBoundWithIdZero) {
  StringTable t(2);
  EXPECT_NE(t.Intern(StringKind::kTag, "a"), 0u);
  EXPECT_NE(t.Intern(StringKind::kTag, "b"), 0u);
  EXPECT_EQ(t.Intern(StringKind::kTag, "c"), 0u);
  EXPECT_EQ(t.refused(), 1u);
  EXPECT_EQ(t.Intern(StringKind::kTag, "a"), 1u);  // known ones still resolve
}

TEST(StringTableTest, TakeForBatchSendsEachDefinitionOnce) {
  StringTable t(100);
  const uint32_t a = t.Intern(StringKind::kTag, "a");
  const uint32_t s = t.Intern(StringKind::kSource, "libc10_cuda.so");
  std::vector<Event> events = {Using(a), Using(a, s)};
  std::vector<StringDef> out;
  EXPECT_EQ(t.TakeForBatch(events, 100, 1 << 20, &out), 2u);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].value, "a");
  EXPECT_EQ(out[1].value, "libc10_cuda.so");
  EXPECT_EQ(out[1].kind, StringKind::kSource);
  std::vector<StringDef> again;
  EXPECT_EQ(t.TakeForBatch(events, 100, 1 << 20, &again), 2u);
  EXPECT_TRUE(again.empty());
  EXPECT_FALSE(t.has_pending());
}

TEST(StringTableTest, DefinitionsTheEventsUseGoFirstAndBoundsCutTheBatch) {
  StringTable t(100);
  std::vector<uint32_t> ids;
  for (int i = 0; i < 10; ++i) ids.push_back(t.Intern(StringKind::kTag, std::string(100, 'a' + i)));
  // Events use ids 10, 9, 8, ... ; at most 3 definitions fit in a batch.
  std::vector<Event> events;
  for (int i = 9; i >= 0; --i) events.push_back(Using(ids[i]));
  std::vector<StringDef> out;
  const size_t covered = t.TakeForBatch(events, 3, 1 << 20, &out);
  EXPECT_EQ(covered, 3u);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].id, ids[9]);
  EXPECT_EQ(out[2].id, ids[7]);
  // By bytes too: 250 bytes hold two 100-byte values.
  std::vector<StringDef> out2;
  std::vector<Event> rest(events.begin() + 3, events.end());
  EXPECT_EQ(t.TakeForBatch(rest, 100, 250, &out2), 2u);
  EXPECT_EQ(out2.size(), 2u);
}

TEST(StringTableTest, FirstEventIsAlwaysCoveredEvenBeyondTheBounds) {
  StringTable t(100);
  const uint32_t a = t.Intern(StringKind::kTag, std::string(1000, 'x'));
  std::vector<Event> events = {Using(a), Using(a)};
  std::vector<StringDef> out;
  EXPECT_EQ(t.TakeForBatch(events, 100, 10, &out), 2u);
  EXPECT_EQ(out.size(), 1u);
}

TEST(StringTableTest, UnusedPendingDefinitionsFillTheRemainingRoom) {
  StringTable t(100);
  t.Intern(StringKind::kPhase, "rollout");
  t.Intern(StringKind::kPhase, "actor_update");
  std::vector<Event> events = {Using(0)};
  std::vector<StringDef> out;
  EXPECT_EQ(t.TakeForBatch(events, 100, 1 << 20, &out), 1u);
  EXPECT_EQ(out.size(), 2u);
}

TEST(StringTableTest, ResendQueuesDefinitionsAgain) {
  StringTable t(100);
  const uint32_t a = t.Intern(StringKind::kTag, "a");
  const uint32_t b = t.Intern(StringKind::kTag, "b");
  std::vector<StringDef> out;
  t.TakeForBatch({}, 100, 1 << 20, &out);
  ASSERT_EQ(out.size(), 2u);
  t.Resend({out[1]});
  std::vector<StringDef> again;
  t.TakeForBatch({}, 100, 1 << 20, &again);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].id, b);
  t.ResendAll();
  std::vector<StringDef> all;
  t.TakeForBatch({}, 100, 1 << 20, &all);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].id, a);
}

TEST(SanitizeStringValueTest, KeepsValidUtf8AndReplacesInvalidBytes) {
  EXPECT_EQ(SanitizeStringValue("plain"), "plain");
  EXPECT_EQ(SanitizeStringValue("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"),
            "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
  EXPECT_EQ(SanitizeStringValue("a\xff" "b"), "a?b");
  EXPECT_EQ(SanitizeStringValue("\xc3"), "?");                // truncated sequence
  EXPECT_EQ(SanitizeStringValue("\xc0\xaf"), "??");           // overlong
  EXPECT_EQ(SanitizeStringValue("\xed\xa0\x80"), "???");      // surrogate
  EXPECT_EQ(SanitizeStringValue("\xf4\x90\x80\x80"), "????");  // above U+10FFFF
}

TEST(SanitizeStringValueTest, CutsLongValuesOnACharacterBoundary) {
  std::string euro_run;
  for (int i = 0; i < 2000; ++i) euro_run += "\xe2\x82\xac";  // 6000 bytes
  std::string cut = SanitizeStringValue(euro_run);
  EXPECT_LE(cut.size(), kMaxStringValueBytes);
  EXPECT_EQ(cut.size() % 3, 0u);
  EXPECT_EQ(SanitizeStringValue(std::string(5000, 'x')).size(), kMaxStringValueBytes);
}

TEST(StringTableTest, InvalidAndOverlongValuesInternByTheirSanitizedForm) {
  StringTable t(100);
  const uint32_t a = t.Intern(StringKind::kTag, "bad\xff");
  EXPECT_EQ(t.Intern(StringKind::kTag, "bad?"), a);
  EXPECT_EQ(t.Intern(StringKind::kTag, "bad\xff"), a);
  const uint32_t b = t.Intern(StringKind::kTag, std::string(5000, 'y'));
  EXPECT_EQ(t.Intern(StringKind::kTag, std::string(6000, 'y')), b);
  std::vector<StringDef> out;
  t.TakeForBatch({}, 100, 1 << 20, &out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].value, "bad?");
  EXPECT_EQ(out[1].value.size(), kMaxStringValueBytes);
}

// 65536 strings of 4 KiB each, kept twice, were half a GiB of the training process: the table
// also stops at a byte bound.
TEST(StringTableTest, StopsAtItsByteBoundToo) {
  StringTable t(1000, /*max_bytes=*/128 * 1024);
  const std::string big(4000, 'x');
  int accepted = 0;
  for (int i = 0; i < 100; ++i) {
    if (t.Intern(StringKind::kSource, big + std::to_string(i)) != 0) ++accepted;
  }
  EXPECT_EQ(accepted, 12);  // 2 x 4001-4002 bytes each within the sources' 96 KiB
  EXPECT_EQ(t.refused(), 88u);
  EXPECT_NE(t.Intern(StringKind::kSource, big + "0"), 0u);  // known strings still resolve
  // Stacks filling theirs leave tags and phases their own 32 KiB: with one shared bound, every
  // new tag was recorded unnamed once 4096 stack sources had been seen.
  EXPECT_NE(t.Intern(StringKind::kTag, "fsdp:layers.0"), 0u);
  EXPECT_NE(t.Intern(StringKind::kPhase, "rollout"), 0u);
  int tags = 0;
  for (int i = 0; i < 10; ++i) tags += t.Intern(StringKind::kTag, big + std::to_string(i)) != 0;
  EXPECT_EQ(tags, 4);  // 2 x 4001 bytes each within 32 KiB, beside the two short ones
}

// Sources and the names of steps' phases and tags shared the 65536 ids: a run with that many
// call sites recorded every tag it met afterwards unnamed.
TEST(StringTableTest, SourcesLeaveAQuarterOfTheIdsToTagsAndPhases) {
  StringTable t(8);
  int sources = 0;
  for (int i = 0; i < 8; ++i) {
    sources += t.Intern(StringKind::kSource, "site" + std::to_string(i)) != 0;
  }
  EXPECT_EQ(sources, 6);
  EXPECT_EQ(t.refused(), 2u);
  EXPECT_NE(t.Intern(StringKind::kSource, "site0"), 0u);  // known ones still resolve
  EXPECT_NE(t.Intern(StringKind::kTag, "fsdp:layers.0"), 0u);
  EXPECT_NE(t.Intern(StringKind::kPhase, "rollout"), 0u);
  EXPECT_EQ(t.Intern(StringKind::kTag, "fsdp:layers.1"), 0u);  // the whole table is full
  EXPECT_EQ(t.size(), 8u);
}

// Tags and phases are not held to a quarter: they may use every id the sources left.
TEST(StringTableTest, TagsMayUseEveryIdLeft) {
  StringTable t(8);
  int tags = 0;
  for (int i = 0; i < 10; ++i) tags += t.Intern(StringKind::kTag, "tag" + std::to_string(i)) != 0;
  EXPECT_EQ(tags, 8);
}

}  // namespace
}  // namespace memtrace
