// memtrace-emit: a stand-in training worker for launcher tests. It reads its identity and
// transport settings from the environment exactly as the injected agent does
// (agent/identity), records N synthetic alloc/free events under one tag, flushes and shuts
// down cleanly.
//
//   memtrace-emit [--events=N] [--tag=NAME] [--flush_timeout_ms=MS] [--help]
//
// Exit status: 0 when every event was acknowledged and the stream closed cleanly (one summary
// line on stdout); 2 on bad flags or environment; 3 when delivery failed or any event was
// dropped (a full queue: MEMTRACE_QUEUE_EVENTS). Failures print one
// line "memtrace-emit: <reason>" on stderr.
#include <cstdio>
#include <algorithm>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "agent/identity/env.h"
#include "agent/identity/transport_env.h"
#include "agent/stream/transport.h"

namespace memtrace {
namespace {

constexpr int kExitBadInput = 2;
constexpr int kExitUndelivered = 3;

constexpr char kUsage[] =
    "memtrace-emit: a stand-in training worker for launcher tests. It reads its identity\n"
    "(RANK, WORLD_SIZE, MEMTRACE_JOB_ID, TORCHELASTIC_RESTART_COUNT, ...) and collector\n"
    "address (MEMTRACE_COLLECTOR) from the environment as the injected agent does, records N\n"
    "synthetic 1 MiB alloc/free events under one tag, flushes and shuts down.\n"
    "\n"
    "Usage: memtrace-emit [--events=N] [--tag=NAME] [--flush_timeout_ms=MS] [--help]\n"
    "  --events N            events to record, alternately alloc and free (default 1000)\n"
    "  --tag NAME            their tag (default memtrace-emit)\n"
    "  --flush_timeout_ms MS how long to wait for them to be acknowledged (default 10000)\n"
    "\n"
    "Exit status: 0 when every event was acknowledged; 2 on bad flags or environment; 3 when\n"
    "delivery failed or any event was dropped.\n";

struct Flags {
  bool help = false;
  uint64_t events = 1000;
  std::string tag = "memtrace-emit";
  int64_t flush_timeout_ms = 10000;
};

int Fail(int code, const std::string& reason) {
  std::fprintf(stderr, "memtrace-emit: %s\n", reason.c_str());
  return code;
}

// Accepts --name=value and --name value.
absl::Status ParseFlags(int argc, char** argv, Flags* flags) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      flags->help = true;
      return absl::OkStatus();
    }
    std::string name = arg, value;
    const size_t eq = arg.find('=');
    if (eq != std::string::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return absl::InvalidArgumentError(absl::StrCat("flag ", arg, " needs a value"));
    }
    if (name == "--events") {
      if (!absl::SimpleAtoi(value, &flags->events)) {
        return absl::InvalidArgumentError(absl::StrCat("--events='", value, "' is not a count"));
      }
    } else if (name == "--tag") {
      flags->tag = value;
    } else if (name == "--flush_timeout_ms") {
      if (!absl::SimpleAtoi(value, &flags->flush_timeout_ms) || flags->flush_timeout_ms < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("--flush_timeout_ms='", value, "' is not a non-negative integer"));
      }
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown flag ", name, " (known: --events, --tag, --flush_timeout_ms, --help)"));
    }
  }
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  Flags flags;
  if (absl::Status s = ParseFlags(argc, argv, &flags); !s.ok()) {
    return Fail(kExitBadInput, std::string(s.message()));
  }
  if (flags.help) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  absl::StatusOr<TransportOptions> options = TransportOptionsFromEnvironment(ProcessEnvironment());
  if (!options.ok()) return Fail(kExitBadInput, std::string(options.status().message()));
  const v1::RankIdentity identity = options->identity;
  const std::string address = options->collector_address;
  absl::StatusOr<std::unique_ptr<Transport>> transport = Transport::Start(*std::move(options));
  if (!transport.ok()) return Fail(kExitBadInput, std::string(transport.status().message()));
  Transport& t = **transport;

  const uint32_t tag = t.Intern(StringKind::kTag, flags.tag);
  const uint32_t device = identity.device_index() >= 0 ? identity.device_index() : 0;
  int64_t ts = absl::GetCurrentTimeNanos();
  for (uint64_t i = 0; i < flags.events; ++i) {
    Event e;
    // Pairs: allocate a 1 MiB block, then free it.
    e.kind = i % 2 == 0 ? EventKind::kAlloc : EventKind::kFree;
    e.ts_ns = ts = std::max(ts + 1, absl::GetCurrentTimeNanos());
    e.address = 0x7f0000000000ull + (i / 2) * (1ull << 20);
    e.bytes = 1ull << 20;
    e.tag_id = tag;
    e.device = device;
    e.memory_kind = kMemoryDevice;
    t.Record(e);
  }
  const absl::Duration timeout = absl::Milliseconds(flags.flush_timeout_ms);
  if (absl::Status s = t.Flush(timeout); !s.ok()) {
    t.Shutdown(absl::ZeroDuration()).IgnoreError();
    return Fail(kExitUndelivered, std::string(s.message()));
  }
  if (absl::Status s = t.Shutdown(timeout); !s.ok()) {
    return Fail(kExitUndelivered, std::string(s.message()));
  }
  const TransportStats stats = t.stats();
  if (stats.events_lost > 0) {
    // Dropped before they were sent (a full queue or spool), or by the collector: the flush
    // succeeded for what was left, which the summary used to call "every event acknowledged".
    return Fail(
        kExitUndelivered,
        absl::StrCat(stats.events_lost, " of ", flags.events,
                     " events were dropped, not delivered (queue full: ",
                     stats.events_lost_queue_full, ", spool full: ", stats.events_lost_spool_full,
                     ", lost by the collector: ", stats.events_lost_collector,
                     "); the rest were acknowledged by ", address, " (durable seq ",
                     stats.durable_seq, ")"));
  }
  // The attempt the collector stored the stream as: a rank's next one, when it held this one
  // from a run that ended (the identity's own said "attempt 0" after the agent said 1).
  std::printf(
      "memtrace-emit: job %s rank %d attempt %u: %llu events acknowledged by %s "
      "(durable seq %llu)\n",
      identity.job_id().c_str(), identity.rank(), stats.stored_attempt.value_or(identity.attempt()),
      static_cast<unsigned long long>(flags.events), address.c_str(),
      static_cast<unsigned long long>(stats.durable_seq));
  return 0;
}

}  // namespace
}  // namespace memtrace

int main(int argc, char** argv) { return memtrace::Main(argc, argv); }
