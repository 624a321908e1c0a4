// The transport against an in-process Ingest service on a real loopback port.
#include "agent/stream/transport.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "agent/stream/batch_store.h"
#include "agent/stream/fake_collector.h"
#include "agent/stream/stderr_lines.h"
#include "gtest/gtest.h"
#include "proto/codec/event.h"
#include "proto/connect/client_channel.h"
#include "tests/util/test_dirs.h"

namespace memtrace {
namespace {

using Stream = FakeCollector::Stream;

TransportOptions Options(const std::string& address) {
  TransportOptions o;
  o.collector_address = address;
  o.identity.set_job_id("job-t");
  o.identity.set_rank(3);
  o.identity.set_world_size(4);
  o.max_batch_events = 256;
  o.max_batch_delay = absl::Milliseconds(5);
  o.initial_backoff = absl::Milliseconds(10);
  o.max_backoff = absl::Milliseconds(100);
  return o;
}

Event Alloc(uint64_t i, uint32_t tag = 0) {
  Event e;
  e.kind = i % 2 == 0 ? EventKind::kAlloc : EventKind::kFree;
  e.ts_ns = 1'000'000 + static_cast<int64_t>(i) * 10;
  e.address = 0x7f0000000000ull + (i / 2) * 4096;
  e.bytes = 4096 + i;
  e.tag_id = tag;
  e.device = 1;
  e.memory_kind = kMemoryDevice;
  return e;
}

// How a test hands events to the transport: Record() one by one, or RecordMany() as one span
// (as the CUPTI translator does); the two must behave alike.
enum class Handover { kOneByOne, kSpan };

// Hands Alloc(first) .. Alloc(first + n - 1) to `t`.
void RecordAllocs(Transport& t, uint64_t first, uint64_t n, Handover how) {
  std::vector<Event> events;
  for (uint64_t i = first; i < first + n; ++i) events.push_back(Alloc(i));
  if (how == Handover::kSpan) {
    t.RecordMany(events);
    return;
  }
  for (const Event& e : events) t.Record(e);
}

// What the collector must hold after `n` events from Alloc(0..n-1): each once, in order.
void ExpectExactly(const Stream& s, uint64_t first, uint64_t n) {
  ASSERT_EQ(s.events.size(), n);
  for (uint64_t k = 0; k < n; ++k) {
    Event want = Alloc(first - 1 + k);
    want.seq = first + k;
    ASSERT_EQ(s.events[k], want) << "event " << k;
  }
  EXPECT_EQ(s.seq_gaps, 0u);
}

std::unique_ptr<Transport> StartOrDie(TransportOptions options) {
  absl::StatusOr<std::unique_ptr<Transport>> t = Transport::Start(std::move(options));
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *std::move(t) : nullptr;
}

bool WaitConnected(const Transport& t, absl::Duration timeout = absl::Seconds(5)) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!t.stats().connected) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(2));
  }
  return true;
}

// A port on which nothing listens: one the OS gave a server that has stopped.
int DeadPort() {
  FakeCollector c;
  EXPECT_TRUE(c.Start().ok());
  int port = c.port();
  c.Stop();
  return port;
}

TEST(TransportTest, DeliversEveryEventOnceInOrderWithTheHelloIdentity) {
  FakeCollector collector;
  ASSERT_TRUE(collector.Start().ok());
  auto t = StartOrDie(Options(collector.address()));
  for (uint64_t i = 0; i < 10000; ++i) t->Record(Alloc(i));
  ASSERT_TRUE(t->Flush(absl::Seconds(5)).ok());
  Stream s = collector.Snapshot();
  ExpectExactly(s, 1, 10000);
  EXPECT_EQ(s.identity.job_id(), "job-t");
  EXPECT_EQ(s.identity.rank(), 3);
  EXPECT_EQ(s.hellos, 1);
  for (const FakeCollector::ReceivedBatch& b : s.received) EXPECT_LE(b.count, 256u);
  TransportStats stats = t->stats();
  EXPECT_EQ(stats.durable_seq, 10000u);
  EXPECT_EQ(stats.events_recorded, 10000u);
  EXPECT_EQ(stats.events_lost, 0u);
  EXPECT_EQ(stats.reconnects, 0u);
  EXPECT_TRUE(stats.connected);
}

TEST(TransportTest, EveryEventArrivesExactlyOnceInOrderAcrossAForcedDisconnect) {
  FakeCollector collector;
  ASSERT_TRUE(collector.Start().ok());
  collector.DropStreamAtBatch(3);
  auto t = StartOrDie(Options(collector.address()));
  for (uint64_t i = 0; i < 5000; ++i) {
    t->Record(Alloc(i));
    if (i % 500 == 0) absl::SleepFor(absl::Milliseconds(2));  // spread over many batches
  }
  ASSERT_TRUE(t->Flush(absl::Seconds(5)).ok());
  Stream s = collector.Snapshot();
  ExpectExactly(s, 1, 5000);
  ASSERT_EQ(s.hellos, 2);
  EXPECT_EQ(s.aborted, 1);
  // The dropped batch (and whatever was in flight behind it) was sent again...
  uint64_t received = 0;
  for (const FakeCollector::ReceivedBatch& b : s.received) received += b.count;
  EXPECT_GT(received, 5000u);
  // ...but nothing the second Hello's ack already covered.
  for (const FakeCollector::ReceivedBatch& b : s.received) {
    if (b.stream_index == 2) EXPECT_GT(b.first_seq, s.hello_acks[1]);
  }
  TransportStats stats = t->stats();
  EXPECT_EQ(stats.reconnects, 1u);
  EXPECT_EQ(stats.stream_errors, 1u);
  EXPECT_GE(stats.batches_resent, 1u);
  EXPECT_EQ(s.last_counters.reconnects, 1u);
}

TEST(TransportTest, RecoversWhenTheCollectorRestartsOnTheSamePort) {
  FakeCollector collector;
  ASSERT_TRUE(collector.Start().ok());
  auto t = StartOrDie(Options(collector.address()));
  for (uint64_t i = 0; i < 1000; ++i) t->Record(Alloc(i));
  ASSERT_TRUE(t->Flush(absl::Seconds(5)).ok());
  collector.Stop();
  for (uint64_t i = 1000; i < 2000; ++i) t->Record(Alloc(i));  // recorded while it is down
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_FALSE(t->stats().connected);
  ASSERT_TRUE(collector.Start(collector.port()).ok());
  ASSERT_TRUE(t->Flush(absl::Seconds(8)).ok());
  ExpectExactly(collector.Snapshot(), 1, 2000);
  EXPECT_GE(t->stats().reconnects, 1u);
}

TEST(TransportTest, EventsACollectorLostAfterAcknowledgingThemAreCountedLost) {
  // A collector whose data is gone (a new data directory, a machine crash under async
  // durability) answers the Hello with less than it acknowledged: a fresh fake on the same port.
  auto first = std::make_unique<FakeCollector>();
  ASSERT_TRUE(first->Start().ok());
  const int port = first->port();
  auto t = StartOrDie(Options(first->address()));
  RecordAllocs(*t, 0, 1000, Handover::kOneByOne);
  ASSERT_TRUE(t->Flush(absl::Seconds(5)).ok());
  first->Stop();
  first.reset();
  FakeCollector second;
  ASSERT_TRUE(second.Start(port).ok());
  RecordAllocs(*t, 1000, 10, Handover::kOneByOne);
  ASSERT_TRUE(t->Flush(absl::Seconds(8)).ok());
  EXPECT_EQ(t->stats().events_lost_collector, 1000u);
  EXPECT_EQ(t->stats().events_lost, 1000u);
  // The marker is placed when the Hello is answered, which may be after the new events: it
  // then follows them.
  const auto has_marker = [](const Stream& s) {
    return std::any_of(s.events.begin(), s.events.end(),
                       [](const Event& e) { return e.kind == EventKind::kLoss; });
  };
  ASSERT_TRUE(second.WaitFor(has_marker, absl::Seconds(5)));
  ASSERT_TRUE(t->Flush(absl::Seconds(5)).ok());
  const Stream s = second.Snapshot();
  EXPECT_EQ(s.last_counters.events_lost, 1000u);
  // After the gap of what was lost.
  const auto marker = std::find_if(s.events.begin(), s.events.end(),
                                   [](const Event& e) { return e.kind == EventKind::kLoss; });
  ASSERT_NE(marker, s.events.end());
  EXPECT_EQ(marker->aux, 1000u);
  EXPECT_EQ(marker->memory_kind, kLossCollectorLost);
  EXPECT_EQ(s.events.front().seq, 1001u);
}

// A collector that answers the Hello and then fails every batch (its disk full): an answered
// Hello reset the backoff, so every rank reconnected every 10-50 ms and resent its backlog. The
// backoff now grows until a batch is acknowledged.
TEST(TransportTest, StreamsThatStoreNothingBackOff) {
  FakeCollector collector;
  ASSERT_TRUE(collector.Start().ok());
  collector.FailEveryBatch(true);
  TransportOptions options = Options(collector.address());
  options.initial_backoff = absl::Milliseconds(10);
  options.max_backoff = absl::Milliseconds(400);
  options.log_failures = false;
  auto t = StartOrDie(options);
  for (uint64_t i = 0; i < 1000; ++i) t->Record(Alloc(i));
  absl::SleepFor(absl::Seconds(2));
  // 10 + 20 + 40 + ... + 400 ms: about 8 streams in 2 s (it was over 40).
  EXPECT_LE(collector.Snapshot().hellos, 14);
  EXPECT_GE(collector.Snapshot().hellos, 3);
  collector.FailEveryBatch(false);
  ASSERT_TRUE(t->Flush(absl::Seconds(5)).ok());
  ExpectExactly(collector.Snapshot(), 1, 1000);
}

// stderr a pipe nobody drains (a launcher's full log pipe): the sender's "no Hello ack" line
// blocked in write() while it held the lock Record() takes to wake it, and Record() on every
// training thread waited with it. The line is written by the agent's stderr thread now.
TEST(TransportTest, RecordNeverWaitsOnAStderrNobodyReads) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const int flags = fcntl(fds[1], F_GETFL);
  ASSERT_EQ(fcntl(fds[1], F_SETFL, flags | O_NONBLOCK), 0);
  const std::string fill(4096, 'f');
  while (write(fds[1], fill.data(), fill.size()) > 0) {
  }
  ASSERT_EQ(fcntl(fds[1], F_SETFL, flags), 0);  // full, and blocking as a real stderr would be
  const int saved_stderr = dup(2);
  ASSERT_GE(saved_stderr, 0);
  ASSERT_EQ(dup2(fds[1], 2), 2);

  FakeCollector collector;
  ASSERT_TRUE(collector.Start().ok());
  collector.HoldHelloAcks(true);
  TransportOptions options = Options(collector.address());
  options.hello_timeout = absl::Milliseconds(50);  // its failure line comes at once
  auto t = StartOrDie(options);
  std::atomic<bool> done{false};
  std::atomic<int64_t> slowest_ns{0};
  std::thread training([&] {
    for (uint64_t i = 0; i < 40 * 256; ++i) {
      const absl::Time before = absl::Now();
      t->Record(Alloc(i));
      const int64_t took = absl::ToInt64Nanoseconds(absl::Now() - before);
      if (took > slowest_ns.load()) slowest_ns.store(took);
      if (i % 256 == 0) absl::SleepFor(absl::Milliseconds(10));
    }
    done = true;
  });
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (!done && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(10));
  const bool finished = done;
  // Unblock whatever waits on the pipe, then put stderr back.
  const int read_flags = fcntl(fds[0], F_GETFL);
  fcntl(fds[0], F_SETFL, read_flags | O_NONBLOCK);
  char sink[65536];
  while (!done) {
    while (read(fds[0], sink, sizeof(sink)) > 0) {
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  training.join();
  collector.HoldHelloAcks(false);
  t->Shutdown(absl::Seconds(1)).IgnoreError();
  // The agent's stderr thread writes what it holds before the pipe loses its reader (a write
  // then would be SIGPIPE).
  do {
    while (read(fds[0], sink, sizeof(sink)) > 0) {
    }
  } while (!AgentStderr().Flush(absl::Milliseconds(10)));
  dup2(saved_stderr, 2);
  close(saved_stderr);
  close(fds[0]);
  close(fds[1]);
  EXPECT_TRUE(finished) << "Record() waited on the full stderr";
  EXPECT_LT(slowest_ns.load(), absl::ToInt64Nanoseconds(absl::Seconds(1)));
}

TEST(TransportTest, HelloAckDurableSeqMakesTheTransportSkipWhatTheCollectorHas) {
  FakeCollector collector;
  ASSERT_TRUE(collector.Start().ok());
  collector.PretendStoredThrough(600);
  collector.HoldHelloAcks(true);
  auto t = StartOrDie(Options(collector.address()));
  for (uint64_t i = 0; i < 1000; ++i) t->Record(Alloc(i));
  absl::SleepFor(absl::Milliseconds(50));  // batches formed and waiting for the Hello ack
  EXPECT_TRUE(collector.Snapshot().received.empty());
  collector.HoldHelloAcks(false);
  ASSERT_TRUE(t->Flush(absl::Seconds(5)).ok());
  Stream s = collector.Snapshot();
  ASSERT_FALSE(s.received.empty());
  for (const FakeCollector::ReceivedBatch& b : s.received) EXPECT_GE(b.first_seq, 601u);
  EXPECT_EQ(s.received.front().first_seq, 601u);  // a batch straddling 600 was trimmed
  ExpectExactly(s, 601, 400);
  EXPECT_EQ(t->stats().events_sent, 400u);
  EXPECT_EQ(t->stats().durable_at_first_hello, 600u);
}

TEST(TransportTest, DurableAtFirstHelloIsTheFirstStreamsNotALaterOnes) {
  FakeCollector collector;
  ASSERT_TRUE(collector.Start().ok());
  auto t = StartOrDie(Options(collector.address()));
  EXPECT_EQ(t->stats().durable_at_first_hello, 0u);
  for (uint64_t i = 0; i < 100; ++i) t->Record(Alloc(i));
  ASSERT_TRUE(t->Flush(absl::Seconds(5)).ok());
  EXPECT_EQ(t->stats().durable_at_first_hello, 0u);  // a new producer: the collector had none
  collector.Stop();
  ASSERT_TRUE(collector.Start(collector.port()).ok());  // same fake: it still holds the 100
  for (uint64_t i = 100; i < 200; ++i) t->Record(Alloc(i));
  ASSERT_TRUE(t->Flush(absl::Seconds(8)).ok());
  EXPECT_GE(t->stats().reconnects, 1u);
  EXPECT_EQ(t->stats().durable_at_first_hello, 0u);
}

TEST(TransportTest, QueueOverflowProducesALossEventWithTheExactLostCount) {
  for (Handover how : {Handover::kOneByOne, Handover::kSpan}) {
    SCOPED_TRACE(how == Handover::kSpan ? "RecordMany" : "Record");
    FakeCollector collector;
    ASSERT_TRUE(collector.Start().ok());
    TransportOptions o = Options(collector.address());
    o.queue_capacity = 100;
    // Neither the batch threshold nor the timer drains the queue during the burst, so exactly
    // 100 events fit.
    o.max_batch_events = 1000;
    o.max_batch_delay = absl::Seconds(5);
    auto t = StartOrDie(o);
    ASSERT_TRUE(WaitConnected(*t));
    RecordAllocs(*t, 0, 1000, how);
    EXPECT_EQ(t->stats().events_lost_queue_full, 900u);
    ASSERT_TRUE(t->Flush(absl::Seconds(5)).ok());
    RecordAllocs(*t, 1000, 5, how);
    ASSERT_TRUE(t->Flush(absl::Seconds(5)).ok());

    Stream s = collector.Snapshot();
    ASSERT_EQ(s.events.size(), 106u);
    for (uint64_t k = 0; k < 100; ++k) {
      EXPECT_EQ(s.events[k].kind, Alloc(k).kind);
      EXPECT_EQ(s.events[k].seq, k + 1);
    }
    const Event& loss = s.events[100];
    EXPECT_EQ(loss.kind, EventKind::kLoss);
    EXPECT_EQ(loss.seq, 101u);
    EXPECT_EQ(loss.aux, 900u);
    EXPECT_EQ(loss.memory_kind, kLossQueueFull);
    EXPECT_EQ(loss.ts_ns, Alloc(999).ts_ns);  // the time of the last event dropped
    for (uint64_t k = 101; k < 106; ++k) {
      EXPECT_EQ(s.events[k].seq, k + 1);
      EXPECT_EQ(s.events[k].bytes, Alloc(k + 899).bytes);
    }
    EXPECT_EQ(s.last_counters.events_lost, 900u);
    EXPECT_EQ(s.last_counters.events_recorded, 1005u);
  }
}

TEST(TransportTest, ALossReportedWhileTheQueueIsFullKeepsItsCount) {
  FakeCollector collector;
  ASSERT_TRUE(collector.Start().ok());
  TransportOptions o = Options(collector.address());
  o.queue_capacity = 100;
  o.max_batch_events = 1000;
  o.max_batch_delay = absl::Seconds(5);
  auto t = StartOrDie(o);
  ASSERT_TRUE(WaitConnected(*t));
  RecordAllocs(*t, 0, 100, Handover::kOneByOne);  // full
  t->RecordLoss(kLossCuptiDropped, 1000, Alloc(99).ts_ns);
  t->RecordLoss(kLossCuptiDropped, 0, Alloc(99).ts_ns);  // nothing lost: no marker
  ASSERT_TRUE(t->Flush(absl::Seconds(5)).ok());

  Stream s = collector.Snapshot();
  ASSERT_EQ(s.events.size(), 101u);
  const Event& loss = s.events[100];
  EXPECT_EQ(loss.kind, EventKind::kLoss);
  EXPECT_EQ(loss.seq, 101u);
  EXPECT_EQ(loss.aux, 1000u);
  EXPECT_EQ(loss.memory_kind, kLossCuptiDropped);
  EXPECT_EQ(t->stats().events_lost_queue_full, 0u);
}

// The events that reached `s` (kept), and the sum of its loss markers (lost), each of which
// must be of `reason`.
std::pair<uint64_t, uint64_t> KeptAndLost(const Stream& s, uint32_t reason) {
  uint64_t kept = 0, lost = 0;
  for (const Event& e : s.events) {
    if (e.kind == EventKind::kLoss) {
      EXPECT_EQ(e.memory_kind, reason);
      lost += e.aux;
    } else {
      ++kept;
    }
  }
  return {kept, lost};
}

TEST(TransportTest, LossCountsAddUpUnderConcurrentOverflow) {
  FakeCollector collector;
  ASSERT_TRUE(collector.Start().ok());
  TransportOptions o = Options(collector.address());
  o.queue_capacity = 64;
  o.max_batch_events = 32;
  o.max_batch_delay = absl::Milliseconds(1);
  auto t = StartOrDie(o);
  constexpr uint64_t kPerThread = 50000;
  std::vector<std::thread> threads;
  for (int k = 0; k < 2; ++k) {
    threads.emplace_back([&] {
      for (uint64_t i = 0; i < kPerThread; ++i) t->Record(Alloc(i));
    });
  }
  for (std::thread& th : threads) th.join();
  ASSERT_TRUE(t->Flush(absl::Seconds(8)).ok());
  Stream s = collector.Snapshot();
  const auto [kept, lost] = KeptAndLost(s, kLossQueueFull);
  EXPECT_EQ(kept + lost, 2 * kPerThread);
  EXPECT_EQ(lost, t->stats().events_lost);
  EXPECT_EQ(s.seq_gaps, 0u);
  EXPECT_EQ(s.events.back().seq, t->stats().last_seq);
}

TEST(TransportTest, FlushReturnsOnlyAfterTheAck) {
  FakeCollector collector;
  ASSERT_TRUE(collector.Start().ok());
  collector.HoldAcks(true);
  auto t = StartOrDie(Options(collector.address()));
  for (uint64_t i = 0; i < 10; ++i) t->Record(Alloc(i));
  absl::Status early = t->Flush(absl::Milliseconds(300));
  EXPECT_EQ(early.code(), absl::StatusCode::kDeadlineExceeded) << early;
  // Delivered and stored, but not acknowledged: not flushed.
  EXPECT_EQ(collector.Snapshot().events.size(), 10u);
  EXPECT_EQ(t->stats().durable_seq, 0u);
  collector.HoldAcks(false);
  ASSERT_TRUE(t->Flush(absl::Seconds(5)).ok());
  EXPECT_EQ(t->stats().durable_seq, 10u);
}

TEST(TransportTest, ShutdownCompletesTheStreamCleanly) {
  FakeCollector collector;
  ASSERT_TRUE(collector.Start().ok());
  auto t = StartOrDie(Options(collector.address()));
  for (uint64_t i = 0; i < 100; ++i) t->Record(Alloc(i));
  absl::Status s = t->Shutdown(absl::Seconds(5));
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_TRUE(
      collector.WaitFor([](const Stream& st) { return st.clean_closes == 1; }, absl::Seconds(2)));
  Stream st = collector.Snapshot();
  EXPECT_EQ(st.aborted, 0);
  ExpectExactly(st, 1, 100);
  EXPECT_TRUE(t->Shutdown(absl::Seconds(5)).ok());  // idempotent
  t->Record(Alloc(100));                            // after shutdown: dropped and counted
  EXPECT_EQ(t->stats().events_lost, 1u);
  EXPECT_FALSE(t->stats().connected);
}

TEST(TransportTest, ShutdownRightAfterStartStillClosesCleanly) {
  FakeCollector collector;
  ASSERT_TRUE(collector.Start().ok());
  auto t = StartOrDie(Options(collector.address()));
  absl::Status s = t->Shutdown(absl::Seconds(2));
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_TRUE(
      collector.WaitFor([](const Stream& st) { return st.clean_closes == 1; }, absl::Seconds(2)));
}

TEST(TransportTest, UnreachableCollectorNeitherBlocksRecordNorCrashes) {
  TransportOptions o = Options(absl::StrCat("127.0.0.1:", DeadPort()));
  o.queue_capacity = 1 << 16;
  auto t = StartOrDie(o);
  const absl::Time start = absl::Now();
  for (uint64_t i = 0; i < 200000; ++i) t->Record(Alloc(i));
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  EXPECT_EQ(t->Flush(absl::Milliseconds(100)).code(), absl::StatusCode::kDeadlineExceeded);
  const absl::Time shutdown_start = absl::Now();
  absl::Status s = t->Shutdown(absl::Milliseconds(200));
  EXPECT_LT(absl::Now() - shutdown_start, absl::Seconds(2));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  TransportStats stats = t->stats();
  EXPECT_EQ(stats.events_recorded, 200000u);
  EXPECT_EQ(stats.durable_seq, 0u);
  EXPECT_FALSE(stats.connected);
}

TEST(TransportTest, ShutdownWithNothingRecordedAndNoCollectorSaysUnavailable) {
  auto t = StartOrDie(Options(absl::StrCat("127.0.0.1:", DeadPort())));
  const absl::Time start = absl::Now();
  absl::Status s = t->Shutdown(absl::Milliseconds(100));
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
}

TEST(TransportTest, UnroutableAddressShutsDownInBoundedTime) {
  // 10.255.255.1 normally swallows the SYN (or the sandbox rejects it at once): either way the
  // connection attempt must not hold Record() or Shutdown().
  auto t = StartOrDie(Options("10.255.255.1:7431"));
  for (uint64_t i = 0; i < 1000; ++i) t->Record(Alloc(i));
  const absl::Time start = absl::Now();
  absl::Status s = t->Shutdown(absl::Milliseconds(200));
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
}

TEST(TransportTest, StringsArriveWithOrBeforeTheirFirstUse) {
  FakeCollector collector;
  ASSERT_TRUE(collector.Start().ok());
  auto t = StartOrDie(Options(collector.address()));
  std::vector<uint32_t> tags;
  for (int k = 0; k < 50; ++k) {
    tags.push_back(t->Intern(StringKind::kTag, absl::StrCat("fsdp:layers.", k)));
  }
  const uint32_t source = t->Intern(StringKind::kSource, "libnccl.so.2");
  EXPECT_EQ(t->Intern(StringKind::kTag, "fsdp:layers.7"), tags[7]);  // same value, same id
  for (uint64_t i = 0; i < 3000; ++i) {
    if (i % 100 == 0) tags.push_back(t->Intern(StringKind::kPhase, absl::StrCat("phase ", i)));
    Event e = Alloc(i, tags[i % tags.size()]);
    e.source_id = i % 3 == 0 ? source : 0;
    t->Record(e);
  }
  ASSERT_TRUE(t->Flush(absl::Seconds(5)).ok());
  Stream s = collector.Snapshot();
  EXPECT_EQ(s.events.size(), 3000u);
  EXPECT_EQ(s.undefined_string_uses, 0u);
  ASSERT_EQ(s.strings.size(), 81u);
  EXPECT_EQ(s.strings.at(tags[7]).value, "fsdp:layers.7");
  EXPECT_EQ(s.strings.at(tags[7]).kind, StringKind::kTag);
  EXPECT_EQ(s.strings.at(source).value, "libnccl.so.2");
  EXPECT_EQ(s.strings.at(source).kind, StringKind::kSource);
  EXPECT_EQ(t->stats().strings_interned, 81u);
}

TEST(TransportTest, StringsOfADroppedBatchAreResentAfterReconnect) {
  FakeCollector collector;
  ASSERT_TRUE(collector.Start().ok());
  collector.DropStreamAtBatch(1);  // the batch carrying the first definitions never lands
  auto t = StartOrDie(Options(collector.address()));
  ASSERT_TRUE(WaitConnected(*t));
  const uint32_t a = t->Intern(StringKind::kTag, "model.encoder");
  const uint32_t b = t->Intern(StringKind::kTag, "model.decoder");
  for (uint64_t i = 0; i < 2000; ++i) t->Record(Alloc(i, i % 2 == 0 ? a : b));
  ASSERT_TRUE(t->Flush(absl::Seconds(5)).ok());
  Stream s = collector.Snapshot();
  EXPECT_EQ(s.hellos, 2);
  EXPECT_EQ(s.undefined_string_uses, 0u);
  EXPECT_EQ(s.strings.at(a).value, "model.encoder");
  EXPECT_EQ(s.strings.at(b).value, "model.decoder");
  EXPECT_EQ(s.events.size(), 2000u);
}

TEST(TransportTest, DroppedUnackedBatchesAreReportedAsSpoolFullLossAndKeepTheirStrings) {
  FakeCollector collector;
  ASSERT_TRUE(collector.Start().ok());
  const int port = collector.port();
  collector.Stop();  // the collector is away from the start
  TransportOptions o = Options(collector.address());
  o.max_batch_events = 64;
  o.max_batch_delay = absl::Milliseconds(1);
  o.max_unacked_bytes = 8 << 10;
  auto t = StartOrDie(o);
  const uint32_t tag = t->Intern(StringKind::kTag, "optimizer.state");
  for (uint64_t i = 0; i < 5000; ++i) {
    t->Record(Alloc(i, tag));
    if (i % 256 == 0) absl::SleepFor(absl::Milliseconds(2));
  }
  absl::SleepFor(absl::Milliseconds(20));
  TransportStats before = t->stats();
  EXPECT_GT(before.events_lost_spool_full, 0u);
  EXPECT_LE(before.unacked_bytes, o.max_unacked_bytes + 4096);
  ASSERT_TRUE(collector.Start(port).ok());
  ASSERT_TRUE(t->Flush(absl::Seconds(8)).ok());
  Stream s = collector.Snapshot();
  const auto [kept, lost] = KeptAndLost(s, kLossSpoolFull);
  for (const Event& e : s.events) {
    if (e.kind != EventKind::kLoss) EXPECT_EQ(e.tag_id, tag);
  }
  EXPECT_GT(lost, 0u);
  EXPECT_EQ(kept + lost, 5000u);
  EXPECT_EQ(lost, t->stats().events_lost_spool_full);
  EXPECT_EQ(lost, t->stats().events_lost);
  EXPECT_EQ(s.undefined_string_uses, 0u);  // the definition outlived its dropped batch
  EXPECT_EQ(s.strings.at(tag).value, "optimizer.state");
  EXPECT_EQ(s.last_counters.events_lost, lost);
}

// Each dropped batch passes its definitions on to the oldest kept one, and every new batch
// carries them again; thousands of drops in a long outage once piled thousands of copies of one
// definition into the oldest batch, which the collector then refused (more than 4096 string
// entries) on every resend: nothing more was stored for the stream. And catching up afterwards
// dropped batches already on the wire, which the collector stored and the agent counted lost.
TEST(TransportTest, ALongOutageKeepsEachDefinitionOnceInABatchAndCountsEachLossOnce) {
  FakeCollector collector;
  ASSERT_TRUE(collector.Start().ok());
  const int port = collector.port();
  collector.Stop();  // the collector is away from the start
  TransportOptions o = Options(collector.address());
  o.max_batch_events = 4;
  o.max_batch_delay = absl::Milliseconds(1);
  o.max_unacked_bytes = 1 << 10;  // a few batches; every new one drops one
  auto t = StartOrDie(o);
  const uint32_t tag = t->Intern(StringKind::kTag, "optimizer.state");
  constexpr uint64_t kEvents = 40000;
  for (uint64_t i = 0; i < kEvents; ++i) {
    t->Record(Alloc(i, tag));
    if (i % 64 == 0) absl::SleepFor(absl::Microseconds(200));  // let the sender seal batches
  }
  // Enough drops that the pile-up would pass the collector's bound of 4096 entries a batch.
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (t->stats().events_lost_spool_full <= 4u * 5000 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_GT(t->stats().events_lost_spool_full, 4u * 5000) << "too few drops to show the pile-up";
  ASSERT_TRUE(collector.Start(port).ok());
  // Catching up drops more batches, whose losses get markers after what a Flush waits for.
  for (int i = 0; i < 20 && t->stats().durable_seq < t->stats().last_seq; ++i) {
    ASSERT_TRUE(t->Flush(absl::Seconds(10)).ok());
  }
  ASSERT_EQ(t->stats().durable_seq, t->stats().last_seq);
  Stream s = collector.Snapshot();
  size_t most_strings = 0;
  for (const FakeCollector::ReceivedBatch& b : s.received) {
    most_strings = std::max(most_strings, b.strings);
  }
  EXPECT_LE(most_strings, 1u);
  const auto [kept, lost] = KeptAndLost(s, kLossSpoolFull);
  // Exactly: no batch the collector stored was also counted lost (catching up drops batches
  // not yet sent before any on the wire).
  EXPECT_EQ(kept + lost, kEvents) << "kept " << kept << ", lost " << lost;
  EXPECT_EQ(lost, t->stats().events_lost);
  EXPECT_EQ(s.undefined_string_uses, 0u);
}

TEST(TransportTest, SpilledBatchesThatCannotBeReadBackAreReportedAsALoss) {
  FakeCollector collector;
  ASSERT_TRUE(collector.Start().ok());
  const int port = collector.port();
  collector.Stop();  // the collector is away from the start
  TransportOptions o = Options(collector.address());
  o.max_batch_events = 64;
  o.max_batch_delay = absl::Milliseconds(1);
  o.max_unacked_bytes = 8 << 10;  // the rest spills
  o.spool_dir = test_util::TmpPath("unreadable-spool");
  auto t = StartOrDie(o);
  for (uint64_t i = 0; i < 5000; ++i) {
    t->Record(Alloc(i));
    if (i % 256 == 0) absl::SleepFor(absl::Milliseconds(2));
  }
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(t->stats().events_lost, 0u);  // all kept, most on disk
  // The disk loses them (a cleaner, a full disk that damaged them: either way unreadable).
  ASSERT_EQ(std::system(("find '" + o.spool_dir + "' -name '*.batch' -delete").c_str()), 0);
  ASSERT_TRUE(collector.Start(port).ok());
  ASSERT_TRUE(t->Flush(absl::Seconds(8)).ok());
  Stream s = collector.Snapshot();
  const auto [kept, lost] = KeptAndLost(s, kLossSpoolFull);
  EXPECT_GT(lost, 0u);
  EXPECT_EQ(kept + lost, 5000u);
  EXPECT_EQ(t->stats().events_lost, lost);
  EXPECT_EQ(t->stats().events_lost_spool_full, lost);
  EXPECT_EQ(s.last_counters.events_lost, lost);
}

TEST(TransportTest, StartRejectsInvalidOptions) {
  TransportOptions no_job = Options("127.0.0.1:1");
  no_job.identity.clear_job_id();
  EXPECT_EQ(Transport::Start(no_job).status().code(), absl::StatusCode::kInvalidArgument);
  TransportOptions no_address = Options("");
  EXPECT_EQ(Transport::Start(no_address).status().code(), absl::StatusCode::kInvalidArgument);
  TransportOptions huge_batch = Options("127.0.0.1:1");
  huge_batch.max_batch_events = 70000;
  absl::Status s = Transport::Start(huge_batch).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("70000"), std::string::npos) << s;
  TransportOptions no_queue = Options("127.0.0.1:1");
  no_queue.queue_capacity = 0;
  EXPECT_EQ(Transport::Start(no_queue).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(TransportTest, RefusedStreamIsRetriedUntilAdmitted) {
  FakeCollector collector;
  ASSERT_TRUE(collector.Start().ok());
  collector.RefuseHellos(grpc::Status(grpc::StatusCode::ALREADY_EXISTS, "another producer"));
  auto t = StartOrDie(Options(collector.address()));
  for (uint64_t i = 0; i < 100; ++i) t->Record(Alloc(i));
  ASSERT_TRUE(collector.WaitFor([](const Stream& s) { return s.refused >= 2; }, absl::Seconds(3)));
  EXPECT_FALSE(t->stats().connected);
  // The transport counts a refused stream once its end has reached it, a moment after the
  // collector counted the refusal.
  const absl::Time deadline = absl::Now() + absl::Seconds(3);
  while (t->stats().stream_errors < 2 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(2));
  }
  EXPECT_GE(t->stats().stream_errors, 2u);
  collector.RefuseHellos(grpc::Status::OK);
  ASSERT_TRUE(t->Flush(absl::Seconds(5)).ok());
  ExpectExactly(collector.Snapshot(), 1, 100);
}

// A subprocess that inherited its parent's RANK is refused while the parent streams that rank:
// at exit it waited out the whole drain (3 s in the agent) for a stream it would not be given.
TEST(TransportTest, AProcessOnlyEverRefusedDoesNotWaitOutTheDrainAtShutdown) {
  FakeCollector collector;
  ASSERT_TRUE(collector.Start().ok());
  collector.RefuseHellos(grpc::Status(grpc::StatusCode::ALREADY_EXISTS, "rank 3 is streaming"));
  TransportOptions options = Options(collector.address());
  options.log_failures = false;
  auto t = StartOrDie(options);
  for (uint64_t i = 0; i < 100; ++i) t->Record(Alloc(i));
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (!t->stats().last_stream_refused && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(2));
  }
  ASSERT_TRUE(t->stats().last_stream_refused);
  const absl::Time start = absl::Now();
  const absl::Status status = t->Shutdown(absl::Seconds(5));
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(status.message().find("rank 3 is streaming"), std::string::npos) << status;
}

// The agent never destroys its Transport: a spool directory removed only by the store's
// destructor stayed behind every traced process.
TEST(TransportTest, ShutdownRemovesTheSpoolDirectoryOnceEverythingIsAcknowledged) {
  FakeCollector collector;
  ASSERT_TRUE(collector.Start().ok());
  TransportOptions o = Options(collector.address());
  o.spool_dir = test_util::ClearedPath("spool-at-shutdown");
  auto t = StartOrDie(o);
  for (uint64_t i = 0; i < 1000; ++i) t->Record(Alloc(i));
  ASSERT_TRUE(t->Flush(absl::Seconds(5)).ok());
  const auto entries = [&] {
    int n = 0;
    if (DIR* d = opendir(o.spool_dir.c_str())) {
      while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
      closedir(d);
    }
    return n;
  };
  EXPECT_EQ(entries(), 1);  // this transport's directory
  ASSERT_TRUE(t->Shutdown(absl::Seconds(5)).ok());
  EXPECT_EQ(entries(), 0);
  ExpectExactly(collector.Snapshot(), 1, 1000);
}

TEST(TransportTest, ChannelFactoryCarriesTheBearerToken) {
  FakeCollector collector;
  ASSERT_TRUE(collector.Start().ok());
  TransportOptions o = Options(collector.address());
  int made = 0;
  o.channel_factory = [&made](const std::string& target, const grpc::ChannelArguments& args) {
    ++made;
    connect::ClientSecurity sec;
    sec.token = "s3cret";
    return connect::CreateCollectorChannel(target, sec, args);
  };
  auto t = StartOrDie(o);
  t->Record(Alloc(0));
  ASSERT_TRUE(t->Flush(absl::Seconds(5)).ok());
  EXPECT_EQ(made, 1);
  EXPECT_EQ(collector.Snapshot().authorization, "Bearer s3cret");
}

TEST(TransportTest, StartFailsWhenTheChannelFactoryMakesNoChannel) {
  TransportOptions o = Options("127.0.0.1:1");
  o.channel_factory = [](const std::string&, const grpc::ChannelArguments&) {
    return std::shared_ptr<grpc::Channel>();
  };
  EXPECT_EQ(Transport::Start(o).status().code(), absl::StatusCode::kInvalidArgument);
}

// The unacknowledged bytes a batch reports leave out the batch itself: a stream whose earlier
// batches were all acknowledged reports 0 (it reported its last batch's size, which `memtrace
// ranks` showed for ranks long finished).
TEST(TransportTest, ACaughtUpStreamReportsNoUnackedBytes) {
  FakeCollector collector;
  ASSERT_TRUE(collector.Start().ok());
  auto t = StartOrDie(Options(collector.address()));
  for (uint64_t round = 0; round < 3; ++round) {
    for (uint64_t i = 0; i < 10; ++i) t->Record(Alloc(round * 10 + i));
    ASSERT_TRUE(t->Flush(absl::Seconds(5)).ok());
    EXPECT_EQ(collector.Snapshot().last_counters.spool_bytes, 0u) << "round " << round;
  }
}

TEST(TransportTest, CuptiDropCountTravelsWithBatches) {
  FakeCollector collector;
  ASSERT_TRUE(collector.Start().ok());
  auto t = StartOrDie(Options(collector.address()));
  t->CountCuptiRecordsDropped(7);
  t->Record(Alloc(0));
  ASSERT_TRUE(t->Flush(absl::Seconds(5)).ok());
  EXPECT_EQ(collector.Snapshot().last_counters.cupti_records_dropped, 7u);
  EXPECT_EQ(collector.Snapshot().last_counters.events_recorded, 1u);
}

// RecordMany is Record for each event: every event once, in order, across batches, and a
// span longer than a batch while the sender streams loses nothing when it fits the queue.
TEST(TransportTest, RecordManyDeliversEveryEventOnceInOrder) {
  FakeCollector collector;
  ASSERT_TRUE(collector.Start().ok());
  auto t = StartOrDie(Options(collector.address()));
  std::vector<Event> events;
  for (uint64_t i = 0; i < 10000; ++i) events.push_back(Alloc(i));
  size_t done = 0;
  for (size_t span : {1, 7, 256, 257, 1000, 3000}) {
    t->RecordMany(absl::MakeConstSpan(events).subspan(done, span));
    done += span;
  }
  t->RecordMany({});
  t->RecordMany(absl::MakeConstSpan(events).subspan(done));
  ASSERT_TRUE(t->Flush(absl::Seconds(5)).ok());
  ExpectExactly(collector.Snapshot(), 1, 10000);
  EXPECT_EQ(t->stats().events_recorded, 10000u);
  EXPECT_EQ(t->stats().events_lost, 0u);
}

}  // namespace
}  // namespace memtrace

namespace memtrace {
namespace {

// The agent's host clock is 3.7 s ahead of the collector's: every batch tells the collector so,
// to within half a loopback round trip.
TEST(TransportTest, EstimatesTheCollectorsClockAndSendsItWithEveryBatch) {
  FakeCollector collector;
  ASSERT_TRUE(collector.Start().ok());
  constexpr int64_t kSkew = 3'700'000'000;
  TransportOptions o = Options(collector.address());
  o.clock = [] { return RealtimeNanos() + kSkew; };
  auto t = StartOrDie(o);
  for (uint64_t i = 0; i < 2000; ++i) t->Record(Alloc(i));
  ASSERT_TRUE(t->Flush(absl::Seconds(5)).ok());
  const TransportStats stats = t->stats();
  ASSERT_TRUE(stats.clock.has_value());
  EXPECT_GE(stats.clock_samples, 2u);  // the Hello and at least one batch
  EXPECT_GT(stats.clock->round_trip_ns, 0);
  EXPECT_LT(stats.clock->round_trip_ns, 50'000'000);
  EXPECT_LE(std::abs(stats.clock->offset_ns + kSkew), stats.clock->round_trip_ns / 2 + 1);
  const Stream s = collector.Snapshot();
  ASSERT_TRUE(s.last_clock.has_value());
  EXPECT_LE(std::abs(s.last_clock->offset_ns + kSkew), s.last_clock->round_trip_ns / 2 + 1);
}

// An importer's events are stamped on the clock of the host that recorded the trace: this
// process's offset from the collector must not travel with them.
TEST(TransportTest, WithoutSendClockEstimateNoBatchCarriesOne) {
  FakeCollector collector;
  ASSERT_TRUE(collector.Start().ok());
  TransportOptions o = Options(collector.address());
  o.clock = [] { return RealtimeNanos() + 3'700'000'000; };
  o.send_clock_estimate = false;
  o.max_batch_events = 100;
  auto t = StartOrDie(o);
  for (uint64_t i = 0; i < 2000; ++i) t->Record(Alloc(i));
  ASSERT_TRUE(t->Flush(absl::Seconds(5)).ok());
  const Stream s = collector.Snapshot();
  EXPECT_GE(s.received.size(), 2u);
  EXPECT_EQ(s.events.size(), 2000u);
  EXPECT_FALSE(s.last_clock.has_value());
}

}  // namespace
}  // namespace memtrace

namespace memtrace {
namespace {

// A few events after the stream has gone idle (everything acknowledged, the sender asleep) go
// out within max_batch_delay, without a Flush and without filling a batch.
TEST(TransportTest, ATrickleOfEventsIsSentWithinTheBatchDelay) {
  for (Handover how : {Handover::kOneByOne, Handover::kSpan}) {
    SCOPED_TRACE(how == Handover::kSpan ? "RecordMany" : "Record");
    FakeCollector collector;
    ASSERT_TRUE(collector.Start().ok());
    TransportOptions o = Options(collector.address());
    o.max_batch_events = 4096;
    o.max_batch_delay = absl::Milliseconds(20);
    auto t = StartOrDie(o);
    RecordAllocs(*t, 0, 10, how);
    ASSERT_TRUE(t->Flush(absl::Seconds(5)).ok());
    absl::SleepFor(absl::Milliseconds(100));  // idle: nothing queued, nothing in flight
    RecordAllocs(*t, 10, 3, how);
    const absl::Time deadline = absl::Now() + absl::Seconds(3);
    while (collector.Snapshot().events.size() < 13 && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(5));
    }
    ExpectExactly(collector.Snapshot(), 1, 13);
  }
}

}  // namespace
}  // namespace memtrace

namespace memtrace {
namespace {

// Which BatchStore call a StallingStore holds up.
enum class StoreCall { kNone, kAppend, kNextAfter, kAcknowledge };

// Shared between a test and the StallingStore its transport owns.
struct StallControl {
  std::atomic<StoreCall> stall{StoreCall::kNone};
  absl::Notification entered;  // the stalled call has begun
  absl::Notification release;  // lets it finish
};

// A MemoryBatchStore whose armed call waits for the test to release it, once, as a spool's
// file I/O on a slow or stuck disk would.
class StallingStore final : public BatchStore {
 public:
  explicit StallingStore(std::shared_ptr<StallControl> control)
      : control_(std::move(control)), inner_(64 << 20) {}

  void Append(SealedBatch batch, uint64_t keep_through,
              std::vector<SealedBatch>* dropped) override {
    MaybeStall(StoreCall::kAppend);
    inner_.Append(std::move(batch), keep_through, dropped);
  }
  void Acknowledge(uint64_t durable_seq) override {
    MaybeStall(StoreCall::kAcknowledge);
    inner_.Acknowledge(durable_seq);
  }
  std::optional<SealedBatch> NextAfter(uint64_t seq) const override {
    MaybeStall(StoreCall::kNextAfter);
    return inner_.NextAfter(seq);
  }
  void AddStringsAfter(uint64_t seq, absl::Span<const StringDef> defs) override {
    inner_.AddStringsAfter(seq, defs);
  }
  size_t batches() const override { return inner_.batches(); }
  uint64_t bytes() const override { return inner_.bytes(); }
  uint64_t BytesAfter(uint64_t seq) const override { return inner_.BytesAfter(seq); }

 private:
  void MaybeStall(StoreCall call) const {
    StoreCall armed = call;
    if (!control_->stall.compare_exchange_strong(armed, StoreCall::kNone)) return;
    control_->entered.Notify();
    control_->release.WaitForNotification();
  }

  std::shared_ptr<StallControl> control_;
  MemoryBatchStore inner_;
};

// Record() wakes the sender under the transport's lock; no store call (a spool's spilling,
// reading back, deleting files) may hold that lock, or a stuck disk stalls the training
// thread that records.
TEST(TransportTest, RecordDoesNotWaitForAStalledBatchStore) {
  for (StoreCall call : {StoreCall::kAppend, StoreCall::kNextAfter, StoreCall::kAcknowledge}) {
    SCOPED_TRACE(static_cast<int>(call));
    FakeCollector collector;
    ASSERT_TRUE(collector.Start().ok());
    auto control = std::make_shared<StallControl>();
    TransportOptions o = Options(collector.address());
    o.max_batch_events = 4;
    o.batch_store_factory = [control] { return std::make_unique<StallingStore>(control); };
    auto t = StartOrDie(o);
    RecordAllocs(*t, 0, 4, Handover::kOneByOne);
    ASSERT_TRUE(t->Flush(absl::Seconds(5)).ok());

    control->stall = call;
    RecordAllocs(*t, 4, 4, Handover::kOneByOne);  // a full batch: appended, sent, acked
    ASSERT_TRUE(control->entered.WaitForNotificationWithTimeout(absl::Seconds(5)));
    // The sender has taken those four: the queue is empty, so this Record() wakes it.
    absl::Notification recorded;
    std::thread recorder([&] {
      t->Record(Alloc(8));
      recorded.Notify();
    });
    EXPECT_TRUE(recorded.WaitForNotificationWithTimeout(absl::Seconds(2)))
        << "Record() waited for the store";
    control->release.Notify();
    recorder.join();
    ASSERT_TRUE(t->Flush(absl::Seconds(5)).ok());
    ExpectExactly(collector.Snapshot(), 1, 9);
  }
}

// A spool on a disk that does not answer (a hung NFS mount) holds the sender in a read or write
// with no timeout. Shutdown() joined it without one, so the training process never exited.
TEST(TransportTest, ShutdownLeavesASenderStuckInItsStoreBehind) {
  FakeCollector collector;
  ASSERT_TRUE(collector.Start().ok());
  auto control = std::make_shared<StallControl>();
  TransportOptions o = Options(collector.address());
  o.max_batch_events = 4;
  o.log_failures = false;
  o.batch_store_factory = [control] { return std::make_unique<StallingStore>(control); };
  auto t = StartOrDie(o);
  control->stall = StoreCall::kAppend;
  RecordAllocs(*t, 0, 4, Handover::kOneByOne);
  ASSERT_TRUE(control->entered.WaitForNotificationWithTimeout(absl::Seconds(5)));
  const absl::Time start = absl::Now();
  const absl::Status status = t->Shutdown(absl::Milliseconds(200));
  EXPECT_LT(absl::Now() - start, absl::Seconds(4));
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_NE(status.message().find("sender did not stop"), std::string::npos) << status;
  t.reset();  // the Impl the sender still uses is not freed under it
  control->release.Notify();
  absl::SleepFor(absl::Milliseconds(100));  // it finishes its Append and ends
}

}  // namespace
}  // namespace memtrace
