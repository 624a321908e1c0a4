// The agent's whole configuration from the environment: identity plus transport settings.
#ifndef MEMTRACE_AGENT_IDENTITY_TRANSPORT_ENV_H_
#define MEMTRACE_AGENT_IDENTITY_TRANSPORT_ENV_H_

#include "absl/status/statusor.h"
#include "agent/identity/env.h"
#include "agent/identity/identity.h"
#include "agent/stream/transport_options.h"

namespace memtrace {

// TransportOptions with identity = IdentityFromEnvironment(env, facts) and the MEMTRACE_*
// settings listed in AgentEnvironmentVariables(); unset ones keep TransportOptions' defaults
// (collector 127.0.0.1:7431). MEMTRACE_TOKEN[_FILE] / MEMTRACE_TLS_* (read by
// proto/connect's ClientSecurityFromEnv) set a channel_factory with TLS and the bearer
// token; without them the channel is plaintext. INVALID_ARGUMENT names the variable and value:
// an address without host:port, a count that is not a positive integer in range, an unreadable
// token or PEM file.
absl::StatusOr<TransportOptions> TransportOptionsFromEnvironment(const EnvLookup& env,
                                                                 const ProcessFacts& facts);

// The same with CurrentProcessFacts().
absl::StatusOr<TransportOptions> TransportOptionsFromEnvironment(const EnvLookup& env);

}  // namespace memtrace

#endif  // MEMTRACE_AGENT_IDENTITY_TRANSPORT_ENV_H_
