#include "agent/stream/event_queue.h"

#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace memtrace {
namespace {

Event At(int64_t ts) {
  Event e;
  e.kind = EventKind::kAlloc;
  e.ts_ns = ts;
  e.bytes = static_cast<uint64_t>(ts);
  e.seq = 999;  // ignored: the queue assigns seq
  return e;
}

TEST(EventQueueTest, AssignsConsecutiveSeqFromOneAndPopsInOrder) {
  EventQueue q(10);
  for (int i = 0; i < 5; ++i) q.Push(At(i));
  std::vector<Event> out;
  EXPECT_EQ(q.Pop(3, &out), 3u);
  EXPECT_EQ(q.Pop(10, &out), 2u);
  ASSERT_EQ(out.size(), 5u);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(out[i].seq, static_cast<uint64_t>(i + 1));
    EXPECT_EQ(out[i].ts_ns, i);
  }
  EXPECT_EQ(q.counters().last_seq, 5u);
}

// PushMany is Push for each event: the same seqs, drops, markers and counters.
TEST(EventQueueTest, PushManyDoesWhatPushDoesForEachEvent) {
  std::vector<Event> events;
  for (int i = 0; i < 10; ++i) events.push_back(At(i));
  EventQueue one_by_one(6), many(6);
  for (const Event& e : events) one_by_one.Push(e);
  const EventQueue::Pushed p = many.PushMany(events);
  EXPECT_EQ(p.size_before, 0u);
  EXPECT_EQ(p.size_after, 6u);
  std::vector<Event> a, b;
  one_by_one.Pop(3, &a);
  many.Pop(3, &b);
  one_by_one.Push(At(10));
  // Pop made room for the loss marker and placed it.
  EXPECT_EQ(many.PushMany(absl::MakeConstSpan(&events[0], 1)).size_before, 4u);
  one_by_one.Pop(10, &a);
  many.Pop(10, &b);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].seq, b[i].seq);
    EXPECT_EQ(a[i].kind, b[i].kind);
    EXPECT_EQ(a[i].aux, b[i].aux);
  }
  ASSERT_EQ(b.size(), 8u);
  EXPECT_EQ(b[6].kind, EventKind::kLoss);
  EXPECT_EQ(b[6].aux, 4u);
  EXPECT_EQ(many.counters().pushed, 11u);
  EXPECT_EQ(many.counters().lost_queue_full, 4u);
  const EventQueue::Pushed none = many.PushMany({});
  EXPECT_EQ(none.size_before, none.size_after);
  many.Close();
  many.PushMany(events);
  EXPECT_EQ(many.counters().lost_after_close, 10u);
}

TEST(EventQueueTest, WrapsAroundTheRing) {
  EventQueue q(4);
  std::vector<Event> out;
  for (int round = 0; round < 10; ++round) {
    for (int i = 0; i < 3; ++i) q.Push(At(round * 3 + i));
    q.Pop(3, &out);
  }
  ASSERT_EQ(out.size(), 30u);
  for (int i = 0; i < 30; ++i) EXPECT_EQ(out[i].ts_ns, i);
}

TEST(EventQueueTest, FullQueueDropsAndTheNextRoomCarriesOneLossMarker) {
  EventQueue q(3);
  for (int i = 0; i < 10; ++i) q.Push(At(i));
  EXPECT_EQ(q.counters().lost_queue_full, 7u);
  EXPECT_EQ(q.counters().pushed, 10u);
  std::vector<Event> out;
  q.Pop(3, &out);  // makes room: the marker goes in right behind the kept events
  q.Push(At(10));
  q.Pop(10, &out);
  ASSERT_EQ(out.size(), 5u);
  EXPECT_EQ(out[3].kind, EventKind::kLoss);
  EXPECT_EQ(out[3].aux, 7u);
  EXPECT_EQ(out[3].memory_kind, kLossQueueFull);
  EXPECT_EQ(out[3].seq, 4u);
  EXPECT_EQ(out[3].ts_ns, 9);  // the last dropped event's time
  EXPECT_EQ(out[4].seq, 5u);
  EXPECT_EQ(out[4].ts_ns, 10);
}

TEST(EventQueueTest, PushPlacesThePendingMarkerBeforeTheEventWhenRoomAppears) {
  EventQueue q(4);
  for (int i = 0; i < 6; ++i) q.Push(At(i));  // 4 kept, 2 lost
  std::vector<Event> out;
  q.Pop(1, &out);  // room for exactly the marker: Pop places it
  ASSERT_EQ(q.counters().size, 4u);
  q.Pop(10, &out);
  ASSERT_EQ(out.size(), 5u);
  EXPECT_EQ(out[4].kind, EventKind::kLoss);
  EXPECT_EQ(out[4].aux, 2u);
}

TEST(EventQueueTest, AddLossGetsAMarkerWithItsReason) {
  EventQueue q(8);
  q.Push(At(1));
  q.AddLoss(kLossSpoolFull, 42);
  std::vector<Event> out;
  q.Pop(10, &out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].kind, EventKind::kLoss);
  EXPECT_EQ(out[1].memory_kind, kLossSpoolFull);
  EXPECT_EQ(out[1].aux, 42u);
  EXPECT_EQ(out[1].seq, 2u);
}

TEST(EventQueueTest, SealReportsALossStillWaitingForRoom) {
  EventQueue q(2);
  for (int i = 0; i < 3; ++i) q.Push(At(i));
  EventQueue::Sealed sealed = q.SealPendingLosses();
  EXPECT_EQ(sealed.last_seq, 2u);
  EXPECT_TRUE(sealed.loss_pending);
  std::vector<Event> out;
  q.Pop(2, &out);  // places the marker
  sealed = q.SealPendingLosses();
  EXPECT_EQ(sealed.last_seq, 3u);
  EXPECT_FALSE(sealed.loss_pending);
}

TEST(EventQueueTest, ClosedQueueDropsAndCountsSeparately) {
  EventQueue q(8);
  q.Push(At(1));
  q.Close();
  q.Push(At(2));
  EventQueue::Counters c = q.counters();
  EXPECT_EQ(c.lost_after_close, 1u);
  EXPECT_EQ(c.lost_queue_full, 0u);
  EXPECT_EQ(c.size, 1u);
}

TEST(EventQueueTest, ConcurrentProducersGetUniqueGapFreeSeqs) {
  EventQueue q(1 << 16);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) q.Push(At(i));
    });
  }
  for (std::thread& t : threads) t.join();
  std::vector<Event> out;
  q.Pop(1 << 16, &out);
  ASSERT_EQ(out.size(), 40000u);
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i].seq, i + 1);
}

}  // namespace
}  // namespace memtrace
