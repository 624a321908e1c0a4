#include "agent/identity/transport_env.h"

#include <map>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "proto/connect/client_channel.h"
#include "proto/connect/collector_address.h"

namespace memtrace {

namespace {

// MEMTRACE_TOKEN[_FILE] / MEMTRACE_TLS_* through proto/connect, the one place that
// turns them into a channel; sets no factory when none is set (plaintext, no token).
absl::Status ReadSecurity(const EnvLookup& env, TransportOptions* options) {
  // ClientSecurityFromEnv reads C strings; std::map nodes keep them alive meanwhile.
  std::map<std::string, std::string> values;
  auto lookup = [&](const char* name) -> const char* {
    std::optional<std::string> v = env(name);
    if (!v.has_value()) return nullptr;
    std::string& slot = values[name];
    slot = *std::move(v);
    return slot.c_str();
  };
  absl::StatusOr<connect::ClientSecurity> sec = connect::ClientSecurityFromEnv(lookup);
  if (!sec.ok()) return sec.status();
  if (sec->token.empty() && !sec->tls()) return absl::OkStatus();
  options->channel_factory = connect::ChannelFactoryFor(*std::move(sec));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TransportOptions> TransportOptionsFromEnvironment(const EnvLookup& env,
                                                                 const ProcessFacts& facts) {
  TransportOptions options;
  absl::StatusOr<v1::RankIdentity> identity = IdentityFromEnvironment(env, facts);
  if (!identity.ok()) return identity.status();
  options.identity = *std::move(identity);

  if (std::optional<std::string> address = EnvNonEmpty(env, "MEMTRACE_COLLECTOR")) {
    if (absl::Status s = connect::CheckCollectorAddress("MEMTRACE_COLLECTOR", *address); !s.ok()) {
      return s;
    }
    options.collector_address = *address;
  }
  // Queue bound: 2^26 events is ~4.5 GiB, far beyond any sane setting.
  absl::StatusOr<std::optional<int64_t>> queue = EnvInteger(env, "MEMTRACE_QUEUE_EVENTS", 1, 1 << 26);
  if (!queue.ok()) return queue.status();
  if (queue->has_value()) options.queue_capacity = static_cast<size_t>(**queue);

  absl::StatusOr<std::optional<int64_t>> batch = EnvInteger(env, "MEMTRACE_BATCH_EVENTS", 1, 65536);
  if (!batch.ok()) return batch.status();
  if (batch->has_value()) options.max_batch_events = static_cast<size_t>(**batch);

  absl::StatusOr<std::optional<int64_t>> delay = EnvInteger(env, "MEMTRACE_BATCH_DELAY_MS", 1, 60000);
  if (!delay.ok()) return delay.status();
  if (delay->has_value()) options.max_batch_delay = absl::Milliseconds(**delay);

  absl::StatusOr<std::optional<int64_t>> unacked =
      EnvInteger(env, "MEMTRACE_UNACKED_MAX_BYTES", 1, INT64_MAX);
  if (!unacked.ok()) return unacked.status();
  if (unacked->has_value()) options.max_unacked_bytes = static_cast<uint64_t>(**unacked);

  if (std::optional<std::string> dir = EnvNonEmpty(env, "MEMTRACE_SPOOL_DIR")) {
    options.spool_dir = *dir;
  }
  absl::StatusOr<std::optional<int64_t>> spool =
      EnvInteger(env, "MEMTRACE_SPOOL_MAX_BYTES", 0, INT64_MAX);
  if (!spool.ok()) return spool.status();
  if (spool->has_value()) options.spool_max_bytes = static_cast<uint64_t>(**spool);
  if (absl::Status s = ReadSecurity(env, &options); !s.ok()) return s;
  return options;
}

absl::StatusOr<TransportOptions> TransportOptionsFromEnvironment(const EnvLookup& env) {
  return TransportOptionsFromEnvironment(env, CurrentProcessFacts());
}

}  // namespace memtrace
