// The agent's drain on SIGTERM. A launcher ends the surviving workers of a failed job with
// SIGTERM (torchrun does when one rank fails), whose default action ends the process without
// atexit: the last CUPTI records, the batch being formed and the unacknowledged backlog were
// lost, and the rank read as vanished rather than complete, at the moment a user most wants to
// see (what every rank held when one ran out of memory).
//
// When SIGTERM has its default action at install time, its handler only writes a byte to a
// pipe; a thread of this module's runs the drain, then ends the process by SIGTERM as the default
// action would have (the launcher sees the same exit). A second SIGTERM during the drain ends the
// process at once. A handler the application installs later replaces this one, as it should.
// A process forked from this one (its SIGTERM handler inherited) ends at once, untouched.
#ifndef MEMTRACE_AGENT_CUPTI_TERM_DRAIN_H_
#define MEMTRACE_AGENT_CUPTI_TERM_DRAIN_H_

#include <functional>

#include "absl/status/status.h"

namespace memtrace::cupti {

// Installs the handler and starts the thread that runs `drain` (once per process). Returns
// FAILED_PRECONDITION when SIGTERM already has a handler or is ignored (left alone), UNAVAILABLE
// when the pipe or thread cannot be made. Call once; later calls return ALREADY_EXISTS.
absl::Status InstallTermDrain(std::function<void()> drain);

}  // namespace memtrace::cupti

#endif  // MEMTRACE_AGENT_CUPTI_TERM_DRAIN_H_
