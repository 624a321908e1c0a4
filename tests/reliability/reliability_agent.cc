// reliability-agent: a training worker stand-in for the reliability tests. Like the injected
// agent it takes identity and transport settings (collector, token, TLS, spool) from the
// environment and streams through the real Transport; unlike memtrace-emit it paces its events
// and reports what the transport saw, so a test can kill the collector (or this process) in
// the middle and compare what was stored with what was sent.
//
//   reliability-agent --events=N [--rate=EVENTS_PER_S] [--flush_timeout_ms=MS] [--progress_ms=MS]
//                     [--shutdown_timeout_ms=MS] [--tag=NAME]
//
// Events: alloc/free pairs of 1 MiB, a STEP marker every 1000 events, timestamps increasing.
// Prints "PROGRESS recorded=R durable=D" every progress_ms and, at the end, one line
//   RESULT recorded=R durable=D lost=L lost_spool=S lost_queue=Q reconnects=C resent=B
//          max_unacked_bytes=M flush=ok|<error>
// Exit status: 0 delivered, 2 bad flags/environment, 3 not everything acknowledged.
#include <atomic>
#include <cstdio>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "agent/identity/env.h"
#include "agent/identity/transport_env.h"
#include "agent/stream/transport.h"

namespace memtrace {
namespace {

struct Flags {
  uint64_t events = 1000;
  uint64_t rate = 0;  // events per second, 0 = as fast as Record() goes
  int64_t flush_timeout_ms = 60000;
  int64_t progress_ms = 200;
  int64_t shutdown_timeout_ms = 5000;
  std::string tag = "reliability";
};

absl::Status ParseFlags(int argc, char** argv, Flags* f) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    if (eq == std::string::npos) return absl::InvalidArgumentError("flags are --name=value");
    const std::string name = arg.substr(0, eq), value = arg.substr(eq + 1);
    bool ok = true;
    if (name == "--events") {
      ok = absl::SimpleAtoi(value, &f->events);
    } else if (name == "--rate") {
      ok = absl::SimpleAtoi(value, &f->rate);
    } else if (name == "--flush_timeout_ms") {
      ok = absl::SimpleAtoi(value, &f->flush_timeout_ms) && f->flush_timeout_ms >= 0;
    } else if (name == "--progress_ms") {
      ok = absl::SimpleAtoi(value, &f->progress_ms) && f->progress_ms > 0;
    } else if (name == "--shutdown_timeout_ms") {
      ok = absl::SimpleAtoi(value, &f->shutdown_timeout_ms) && f->shutdown_timeout_ms >= 0;
    } else if (name == "--tag") {
      f->tag = value;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag ", name));
    }
    if (!ok) return absl::InvalidArgumentError(absl::StrCat("bad value for ", name, ": ", value));
  }
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  Flags flags;
  if (absl::Status s = ParseFlags(argc, argv, &flags); !s.ok()) {
    std::fprintf(stderr, "reliability-agent: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  absl::StatusOr<TransportOptions> options = TransportOptionsFromEnvironment(ProcessEnvironment());
  if (!options.ok()) {
    std::fprintf(stderr, "reliability-agent: %s\n", options.status().ToString().c_str());
    return 2;
  }
  absl::StatusOr<std::unique_ptr<Transport>> started = Transport::Start(*std::move(options));
  if (!started.ok()) {
    std::fprintf(stderr, "reliability-agent: %s\n", started.status().ToString().c_str());
    return 2;
  }
  Transport& t = **started;

  std::atomic<bool> done{false};
  std::atomic<uint64_t> recorded{0};
  std::atomic<uint64_t> max_unacked{0};
  std::thread progress([&] {
    while (!done.load()) {
      const TransportStats s = t.stats();
      if (s.unacked_bytes > max_unacked.load()) max_unacked.store(s.unacked_bytes);
      std::printf("PROGRESS recorded=%llu durable=%llu\n",
                  static_cast<unsigned long long>(recorded.load()),
                  static_cast<unsigned long long>(s.durable_seq));
      std::fflush(stdout);
      absl::SleepFor(absl::Milliseconds(flags.progress_ms));
    }
  });

  const uint32_t tag = t.Intern(StringKind::kTag, flags.tag);
  const absl::Time start = absl::Now();
  int64_t ts = absl::GetCurrentTimeNanos();
  uint64_t step = 0;
  for (uint64_t i = 0; i < flags.events; ++i) {
    if (flags.rate > 0 && i % 256 == 0) {
      // Paced: event i is due at start + i / rate.
      const absl::Time due = start + absl::Seconds(static_cast<double>(i) / flags.rate);
      const absl::Time now = absl::Now();
      if (due > now) absl::SleepFor(due - now);
    }
    Event e;
    e.ts_ns = ++ts;
    if (i % 1000 == 999) {
      e.kind = EventKind::kStep;
      e.aux = ++step;
    } else {
      e.kind = i % 2 == 0 ? EventKind::kAlloc : EventKind::kFree;
      e.address = 0x7f0000000000ull + (i / 2) * (1ull << 20);
      e.bytes = 1ull << 20;
      e.tag_id = tag;
      e.memory_kind = kMemoryDevice;
    }
    t.Record(e);
    recorded.store(i + 1, std::memory_order_relaxed);
  }
  absl::Status flushed = t.Flush(absl::Milliseconds(flags.flush_timeout_ms));
  absl::Status shut = t.Shutdown(absl::Milliseconds(flags.shutdown_timeout_ms));
  done.store(true);
  progress.join();
  const TransportStats s = t.stats();
  if (s.unacked_bytes > max_unacked.load()) max_unacked.store(s.unacked_bytes);
  const absl::Status result = flushed.ok() ? shut : flushed;
  std::printf(
      "RESULT recorded=%llu durable=%llu lost=%llu lost_spool=%llu lost_queue=%llu "
      "reconnects=%llu resent=%llu max_unacked_bytes=%llu flush=%s\n",
      static_cast<unsigned long long>(s.events_recorded),
      static_cast<unsigned long long>(s.durable_seq),
      static_cast<unsigned long long>(s.events_lost),
      static_cast<unsigned long long>(s.events_lost_spool_full),
      static_cast<unsigned long long>(s.events_lost_queue_full),
      static_cast<unsigned long long>(s.reconnects),
      static_cast<unsigned long long>(s.batches_resent),
      static_cast<unsigned long long>(max_unacked.load()),
      result.ok() ? "ok" : std::string(result.message()).c_str());
  std::fflush(stdout);
  return result.ok() ? 0 : 3;
}

}  // namespace
}  // namespace memtrace

int main(int argc, char** argv) { return memtrace::Main(argc, argv); }
