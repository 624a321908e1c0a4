// memtrace-collector: receives agents' event streams over gRPC, stores them in RocksDB and
// answers queries. See collector/README.md.
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "collector/server/collector_server.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:7431",
          "Address to serve on, HOST:PORT ([::]:PORT for IPv6). Port 0 picks a free port; the "
          "chosen one is printed on the ready line and written to --port_file.");
ABSL_FLAG(std::string, data, "",
          "Directory of the RocksDB store (required). Created, with parents, when missing.");
ABSL_FLAG(std::string, durability, "sync",
          "When a batch is acknowledged: 'sync' = after its WAL record is fsynced (survives "
          "power loss); 'async' = after the OS has it (survives a collector crash or kill -9, "
          "not a machine crash).");
ABSL_FLAG(int64_t, max_message_bytes, 16 << 20,
          "Largest gRPC message accepted; a bigger batch ends its stream with "
          "RESOURCE_EXHAUSTED.");
ABSL_FLAG(int64_t, bucket_ms, 1000,
          "Width of the time buckets (the time axis of the rollups) for jobs first seen by this "
          "collector; a job keeps the width it started with.");
ABSL_FLAG(int64_t, checkpoint_every_steps, 50,
          "Checkpoint each rank's live set every N closed steps (0 = only by event count and at "
          "stream close). Bounds the replay behind `live --at` and restart recovery.");
ABSL_FLAG(int64_t, checkpoint_every_events, int64_t{1} << 21,
          "Also checkpoint after this many events without a checkpoint (jobs without step "
          "markers); 0 = never by count.");
ABSL_FLAG(std::string, port_file, "",
          "When set, write the bound port (decimal and a newline) to this file once serving.");

namespace memtrace::collector {
namespace {

int Fail(const std::string& message) {
  std::fprintf(stderr, "memtrace-collector: %s\n", message.c_str());
  return 2;
}

// Written to a temporary name and renamed, so a reader polling the file never sees half a port.
absl::Status WritePortFile(const std::string& path, int port) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << port << "\n";
    out.close();
    if (!out) return absl::UnavailableError(absl::StrCat("cannot write port file ", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::UnavailableError(absl::StrCat("cannot rename ", tmp, " to ", path));
  }
  return absl::OkStatus();
}

int Run() {
  CollectorServerOptions options;
  options.listen = absl::GetFlag(FLAGS_listen);
  options.store.dir = absl::GetFlag(FLAGS_data);
  if (options.store.dir.empty()) {
    return Fail("--data DIR is required: the directory of the RocksDB store");
  }
  absl::StatusOr<Durability> durability = ParseDurability(absl::GetFlag(FLAGS_durability));
  if (!durability.ok()) return Fail(absl::StrCat("--durability: ", durability.status().message()));
  options.store.durability = *durability;
  const int64_t max_message = absl::GetFlag(FLAGS_max_message_bytes);
  if (max_message <= 0 || max_message > (int64_t{1} << 31) - 1) {
    return Fail(absl::StrCat("--max_message_bytes ", max_message, " is not in 1..2147483647"));
  }
  options.max_message_bytes = static_cast<int>(max_message);
  const int64_t bucket_ms = absl::GetFlag(FLAGS_bucket_ms);
  if (bucket_ms <= 0 || bucket_ms > int64_t{1} << 40) {
    return Fail(absl::StrCat("--bucket_ms ", bucket_ms, " is not > 0"));
  }
  options.store.bucket_ns = bucket_ms * 1'000'000;
  const int64_t every_steps = absl::GetFlag(FLAGS_checkpoint_every_steps);
  const int64_t every_events = absl::GetFlag(FLAGS_checkpoint_every_events);
  if (every_steps < 0 || every_steps > UINT32_MAX || every_events < 0) {
    return Fail("--checkpoint_every_steps and --checkpoint_every_events must be >= 0");
  }
  options.store.checkpoint_every_steps = static_cast<uint32_t>(every_steps);
  options.store.checkpoint_every_events = static_cast<uint64_t>(every_events);

  // Block the stop signals before any thread starts, so that only sigwait() below sees them.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  absl::StatusOr<std::unique_ptr<CollectorServer>> server = CollectorServer::Start(options);
  if (!server.ok()) return Fail(std::string(server.status().message()));
  const std::string port_file = absl::GetFlag(FLAGS_port_file);
  if (!port_file.empty()) {
    if (absl::Status s = WritePortFile(port_file, (*server)->port()); !s.ok()) {
      return Fail(std::string(s.message()));
    }
  }
  std::printf("memtrace-collector listening on %s, data %s\n", (*server)->address().c_str(),
              options.store.dir.c_str());
  std::fflush(stdout);

  int signal = 0;
  sigwait(&stop, &signal);
  std::fprintf(stderr, "memtrace-collector: %s, shutting down\n",
               signal == SIGINT ? "SIGINT" : "SIGTERM");
  (*server)->Shutdown(absl::Seconds(1));
  server->reset();
  std::fprintf(stderr, "memtrace-collector: stopped\n");
  return 0;
}

}  // namespace
}  // namespace memtrace::collector

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Receives memtrace agents' event streams (gRPC memtrace.v1.Ingest), stores them in "
      "RocksDB and answers memtrace.v1.Query.\n"
      "Usage: memtrace-collector --data DIR [--listen HOST:PORT] [--durability sync|async] ...");
  // --help lists this file's flags (Abseil's default looks for a file named like the binary).
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [](absl::string_view path) {
    return absl::EndsWith(path, "collector/main.cc");
  };
  usage.contains_helpshort_flags = usage.contains_help_flags;
  absl::SetFlagsUsageConfig(usage);
  absl::ParseCommandLine(argc, argv);
  return memtrace::collector::Run();
}
