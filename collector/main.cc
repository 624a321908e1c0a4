// memtrace-collector: receives agents' event streams over gRPC, stores them in RocksDB and
// answers queries. See collector/README.md.
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/internal/parse.h"
#include "absl/flags/internal/usage.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "agent/stream/batch_store.h"
#include "agent/stream/string_table.h"
#include "agent/stream/transport_options.h"
#include "collector/server/collector_server.h"
#include "proto/connect/secret_file.h"

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
          "RESOURCE_EXHAUSTED. At least 4 MiB, an agent's largest batch.");
ABSL_FLAG(int64_t, bucket_ms, 1000,
          "Width of the time buckets (the time axis of the rollups) for jobs first seen by this "
          "collector; a job keeps the width it started with.");
ABSL_FLAG(int64_t, checkpoint_every_steps, 50,
          "Checkpoint each rank's live set every N closed steps (0 = only by event count and at "
          "stream close). Bounds the replay behind `live --at` and restart recovery.");
ABSL_FLAG(int64_t, checkpoint_every_events, int64_t{1} << 21,
          "Also checkpoint after this many events without a checkpoint (jobs without step "
          "markers); 0 = never by count.");
ABSL_FLAG(int64_t, query_threads, 0,
          "Threads one `live` or `leaks` query uses to rebuild the ranks' live sets (0 = the "
          "machine's cores, at most 8; 1 = one after another).");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM server certificate (chain) file: serve TLS. Needs --tls_key. Required (or "
          "--insecure) when --listen is not a loopback address.");
ABSL_FLAG(std::string, tls_key, "", "PEM private key file of --tls_cert.");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM CA bundle file: require client certificates signed by it (mutual TLS).");
ABSL_FLAG(bool, insecure, false,
          "Allow plaintext on a non-loopback --listen address (anyone on the network can then "
          "read the traffic; the bearer token still applies).");
ABSL_FLAG(std::string, token_file, "",
          "File holding the bearer token every call must carry (\"authorization: Bearer "
          "TOKEN\"); wrong or missing = UNAUTHENTICATED. Default: $MEMTRACE_TOKEN, else the "
          "file $MEMTRACE_TOKEN_FILE, else no token. Health checks and reflection stay open.");
ABSL_FLAG(int64_t, max_batch_events, 65536,
          "Most events one batch may carry (RESOURCE_EXHAUSTED beyond). At least 16384, the "
          "agents' default batch size: a smaller limit would refuse every full batch, and the "
          "agents resend them forever. Agents given a larger MEMTRACE_BATCH_EVENTS need a limit "
          "at least that large.");
ABSL_FLAG(int64_t, max_strings_per_batch, 4096,
          "Most string-table entries one batch may define (RESOURCE_EXHAUSTED beyond). At least "
          "4096, what an agent defines in one batch at most.");
ABSL_FLAG(int64_t, max_string_bytes, 4096,
          "Longest tag / source / phase name in bytes (INVALID_ARGUMENT beyond). At least 4096: "
          "the agent cuts its strings there.");
ABSL_FLAG(int64_t, max_string_table, 1 << 18,
          "Largest string id (= string-table size) of one stream (RESOURCE_EXHAUSTED beyond). At "
          "least 65536, the ids an agent gives a stream.");
ABSL_FLAG(int64_t, max_ranks_per_job, 16384,
          "Most distinct ranks one job may have; a Hello for one more is RESOURCE_EXHAUSTED. "
          "0 = unbounded.");
ABSL_FLAG(int64_t, max_subprocesses_per_rank, 64,
          "Most processes one rank may start that inherit its RANK and are stored as its "
          "subprocesses (an inference engine, its workers); a Hello for one more is "
          "RESOURCE_EXHAUSTED. Not counted in --max_ranks_per_job. 0 = unbounded.");
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

// A limit flag in 1..max, or an error naming the flag.
absl::StatusOr<uint32_t> LimitFlag(const char* name, int64_t value, int64_t min, int64_t max) {
  if (value < min || value > max) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, " ", value, " is not in ", min, "..", max));
  }
  return static_cast<uint32_t>(value);
}

// TLS files and the token, from the flags and the environment (see the flags' help).
absl::Status LoadSecurity(CollectorServerOptions* options) {
  security::ServerSecurityOptions& sec = options->security;
  const std::string cert = absl::GetFlag(FLAGS_tls_cert);
  const std::string key = absl::GetFlag(FLAGS_tls_key);
  const std::string ca = absl::GetFlag(FLAGS_tls_client_ca);
  if (cert.empty() != key.empty()) {
    return absl::InvalidArgumentError("--tls_cert and --tls_key go together (only one given)");
  }
  if (!ca.empty() && cert.empty()) {
    return absl::InvalidArgumentError("--tls_client_ca needs --tls_cert and --tls_key");
  }
  if (!cert.empty()) {
    absl::StatusOr<std::string> c = connect::ReadPemFile("--tls_cert", cert);
    if (!c.ok()) return c.status();
    absl::StatusOr<std::string> k = connect::ReadPemFile("--tls_key", key);
    if (!k.ok()) return k.status();
    sec.tls_cert_pem = *c;
    sec.tls_key_pem = *k;
  }
  if (!ca.empty()) {
    absl::StatusOr<std::string> c = connect::ReadPemFile("--tls_client_ca", ca);
    if (!c.ok()) return c.status();
    sec.tls_client_ca_pem = *c;
  }
  std::string token_file = absl::GetFlag(FLAGS_token_file);
  const char* env_token = std::getenv("MEMTRACE_TOKEN");
  const char* env_file = std::getenv("MEMTRACE_TOKEN_FILE");
  if (token_file.empty() && env_token != nullptr && *env_token != '\0') {
    if (absl::Status s = connect::CheckToken("MEMTRACE_TOKEN", env_token); !s.ok()) return s;
    sec.token = env_token;
  } else {
    if (token_file.empty() && env_file != nullptr) token_file = env_file;
    if (!token_file.empty()) {
      absl::StatusOr<std::string> t = connect::ReadTokenFile(token_file);
      if (!t.ok()) return t.status();
      sec.token = *t;
    }
  }
  options->allow_insecure = absl::GetFlag(FLAGS_insecure);
  return absl::OkStatus();
}

absl::Status LoadLimits(CollectorServerOptions* options) {
  struct Limit {
    const char* name;
    int64_t value;
    int64_t min;
    uint32_t* out;
    std::string why_min;  // appended to the error when the value is below min
  };
  const Limit limits[] = {
      // An agent fills batches up to its max_batch_events before sending; the collector refuses
      // a larger batch RESOURCE_EXHAUSTED and the agent resends it, so a limit below the agents'
      // batch size stores nothing and says nothing.
      {"max_batch_events", absl::GetFlag(FLAGS_max_batch_events),
       static_cast<int64_t>(kDefaultMaxBatchEvents), &options->limits.max_events,
       absl::StrCat(": agents send batches of up to ", kDefaultMaxBatchEvents,
                    " events by default (MEMTRACE_BATCH_EVENTS), and each batch above the "
                    "limit would be refused and resent forever")},
      // The agents' own bounds on what a batch defines: below them a batch they form in the
      // normal course would be refused and resent forever, and nothing stored (0 is not
      // "unbounded", as it is for max_ranks_per_job).
      {"max_strings_per_batch", absl::GetFlag(FLAGS_max_strings_per_batch),
       static_cast<int64_t>(kMaxStringsPerBatch), &options->limits.max_strings,
       absl::StrCat(": agents define up to ", kMaxStringsPerBatch,
                    " strings in one batch, and a batch above the limit would be refused and "
                    "resent forever")},
      {"max_string_bytes", absl::GetFlag(FLAGS_max_string_bytes),
       static_cast<int64_t>(kMaxStringValueBytes), &options->limits.max_string_bytes,
       absl::StrCat(": agents cut names at ", kMaxStringValueBytes,
                    " bytes, and a batch with a longer one would be refused and resent forever")},
      {"max_string_table", absl::GetFlag(FLAGS_max_string_table),
       static_cast<int64_t>(TransportOptions().max_strings),
       &options->ingest_limits.max_string_table,
       absl::StrCat(": agents give a stream up to ", TransportOptions().max_strings,
                    " string ids, and a batch with a higher one would be refused and resent "
                    "forever")},
      {"max_ranks_per_job", absl::GetFlag(FLAGS_max_ranks_per_job), 0,
       &options->ingest_limits.max_ranks_per_job},
      {"max_subprocesses_per_rank", absl::GetFlag(FLAGS_max_subprocesses_per_rank), 0,
       &options->ingest_limits.max_subprocesses_per_rank},
  };
  for (const Limit& l : limits) {
    absl::StatusOr<uint32_t> v = LimitFlag(l.name, l.value, l.min, UINT32_MAX);
    if (!v.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(v.status().message(), l.value < l.min ? l.why_min : ""));
    }
    *l.out = *v;
  }
  return absl::OkStatus();
}

// The store's and the server's own flags (--listen, --data, --durability, message size,
// buckets, checkpoints, query threads) into `options`; the first bad one's error.
absl::Status LoadServerFlags(CollectorServerOptions* options) {
  options->listen = absl::GetFlag(FLAGS_listen);
  options->store.dir = absl::GetFlag(FLAGS_data);
  if (options->store.dir.empty()) {
    return absl::InvalidArgumentError("--data DIR is required: the directory of the RocksDB store");
  }
  absl::StatusOr<Durability> durability = ParseDurability(absl::GetFlag(FLAGS_durability));
  if (!durability.ok())
    return absl::InvalidArgumentError(
        absl::StrCat("--durability: ", durability.status().message()));
  options->store.durability = *durability;
  const int64_t max_message = absl::GetFlag(FLAGS_max_message_bytes);
  // A batch of the agents' largest (65536 events, ~1 MB) with a full string table (1 MiB).
  constexpr int64_t kMinMessage = 4 << 20;
  if (max_message < kMinMessage || max_message > (int64_t{1} << 31) - 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max_message_bytes ", max_message, " is not in ", kMinMessage,
        "..2147483647: an agent's batch (up to 65536 events and 1 MiB of names) above the limit "
        "would be refused and resent forever"));
  }
  options->max_message_bytes = static_cast<int>(max_message);
  const int64_t bucket_ms = absl::GetFlag(FLAGS_bucket_ms);
  if (bucket_ms <= 0 || bucket_ms > int64_t{1} << 40) {
    return absl::InvalidArgumentError(
        absl::StrCat("--bucket_ms ", bucket_ms, " is not in 1..", int64_t{1} << 40));
  }
  options->store.bucket_ns = bucket_ms * 1'000'000;
  const int64_t every_steps = absl::GetFlag(FLAGS_checkpoint_every_steps);
  const int64_t every_events = absl::GetFlag(FLAGS_checkpoint_every_events);
  if (every_steps < 0 || every_steps > UINT32_MAX || every_events < 0) {
    return absl::InvalidArgumentError(
        "--checkpoint_every_steps and --checkpoint_every_events must be >= 0");
  }
  options->store.checkpoint_every_steps = static_cast<uint32_t>(every_steps);
  options->store.checkpoint_every_events = static_cast<uint64_t>(every_events);
  const int64_t query_threads = absl::GetFlag(FLAGS_query_threads);
  if (query_threads < 0 || query_threads > 256) {
    return absl::InvalidArgumentError(
        absl::StrCat("--query_threads ", query_threads, " is not in 0..256"));
  }
  options->query_threads = static_cast<int>(query_threads);
  return absl::OkStatus();
}

// Where it listens (stdout: launchers read it) and how it is secured (stderr).
void AnnounceListening(const CollectorServer& server, const CollectorServerOptions& options) {
  std::printf("memtrace-collector listening on %s, data %s\n", server.address().c_str(),
              options.store.dir.c_str());
  std::fprintf(stderr, "memtrace-collector: %s, %s\n",
               options.security.tls() ? (options.security.tls_client_ca_pem.empty()
                                             ? "TLS"
                                             : "mutual TLS")
                                      : "plaintext",
               options.security.token.empty() ? "no bearer token: every client is trusted"
                                              : "bearer token required");
  if (options.security.token.empty()) {
    // MEMTRACE_TOKEN="$(cat missing-file)" is empty, not unset: say which it was taken for.
    const char* env_token = std::getenv("MEMTRACE_TOKEN");
    if (env_token != nullptr && *env_token == '\0') {
      std::fprintf(stderr,
                   "memtrace-collector: warning: MEMTRACE_TOKEN is set but empty, which means no "
                   "token; give it the token (or --token_file) to require one\n");
    }
  }
  std::fflush(stdout);
}

int Run() {
  CollectorServerOptions options;
  if (absl::Status s = LoadServerFlags(&options); !s.ok()) return Fail(std::string(s.message()));
  if (absl::Status s = LoadLimits(&options); !s.ok()) return Fail(std::string(s.message()));
  if (absl::Status s = LoadSecurity(&options); !s.ok()) return Fail(std::string(s.message()));

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
  AnnounceListening(**server, options);

  int signal = 0;
  sigwait(&stop, &signal);
  std::fprintf(stderr, "memtrace-collector: %s, shutting down\n",
               signal == SIGINT ? "SIGINT" : "SIGTERM");
  (*server)->Shutdown(absl::Seconds(1));
  server->reset();
  std::fprintf(stderr, "memtrace-collector: stopped\n");
  return 0;
}

// Abseil's parser, with the collector's exit codes: 0 after --help (Abseil exits 1), 2 for an
// unknown flag (Abseil exits 1) or a stray argument (Abseil keeps it unread: `memtrace-collector
// /data` then said only that --data is missing). -1: go on and run. A flag value Abseil cannot
// parse still exits 1, from inside Abseil.
int ParseCommandLine(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (arg == "--") break;
    if (!absl::ConsumePrefix(&arg, "--") && !absl::ConsumePrefix(&arg, "-")) continue;
    const size_t eq = arg.find('=');
    const absl::string_view name = arg.substr(0, eq);
    // Abseil's own usage flags (--help, --helpfull, --version, ...) and --noBOOL forms.
    if (absl::StartsWith(name, "help") || name == "version" || name == "only_check_args") continue;
    if (absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name); flag != nullptr) {
      // Its value here too: "--bucket_ms -5" read the value as an unknown flag "--5", and a
      // value Abseil cannot parse ("--bucket_ms abc") exited 1 where every other flag error
      // exits 2.
      std::optional<std::string> value;
      if (eq != absl::string_view::npos) {
        value = std::string(arg.substr(eq + 1));
      } else if (!flag->IsOfType<bool>() && i + 1 < argc) {
        value = argv[++i];
      }
      std::string error;
      if (value.has_value() && !flag->ParseFrom(*value, &error)) {
        std::fprintf(stderr, "memtrace-collector: --%s: %s\n", std::string(name).c_str(),
                     error.c_str());
        return 2;
      }
      continue;
    }
    if (absl::StartsWith(name, "no") && absl::FindCommandLineFlag(name.substr(2)) != nullptr) {
      continue;
    }
    std::fprintf(stderr, "memtrace-collector: unknown flag --%s (see --help)\n",
                 std::string(name).c_str());
    return 2;
  }
  std::vector<char*> rest = absl::flags_internal::ParseCommandLineImpl(
      argc, argv, absl::flags_internal::ArgvListAction::kRemoveParsedArgs,
      absl::flags_internal::UsageFlagsAction::kIgnoreUsage,
      absl::flags_internal::OnUndefinedFlag::kAbortIfUndefined);
  if (int code = absl::flags_internal::HandleUsageFlags(std::cout, absl::ProgramUsageMessage());
      code != -1) {
    return 0;  // help (or --version) printed: what was asked for
  }
  if (rest.size() > 1) {
    std::fprintf(stderr, "memtrace-collector: unexpected argument '%s' (flags only; see --help)\n",
                 rest[1]);
    return 2;
  }
  return -1;
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
  if (int code = memtrace::collector::ParseCommandLine(argc, argv); code >= 0) return code;
  return memtrace::collector::Run();
}
