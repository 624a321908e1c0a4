// The agent's drain on SIGTERM. A launcher ends the surviving workers of a failed job with
// SIGTERM (torchrun does when one rank fails), whose default action ends the process without
// atexit: the last CUPTI records, the batch being formed and the unacknowledged backlog were
// lost, and the rank read as vanished rather than complete, at the moment a user most wants to
// see (what every rank held when one ran out of memory).
//
// When SIGTERM has its default action at install time, its handler only writes a byte to a
// pipe; a thread of this module's runs the drain, then ends the process by SIGTERM as the default
// action would have (the launcher sees the same exit), after the drain or after `bound`, whichever
// comes first (a CUPTI flush on a wedged GPU must not keep the process alive). A second SIGTERM
// a second or more after the first ends the process at once; one sooner is the same shutdown
// signalled twice (scancel and the launcher). A handler the application installs later replaces
// this one, as it should. A process forked from this one (its SIGTERM handler inherited) ends at
// once, untouched. While the drain runs the application's threads go on; their blocking calls
// may see EINTR, which a fatal SIGTERM never let them see.
#ifndef MEMTRACE_AGENT_CUPTI_TERM_DRAIN_H_
#define MEMTRACE_AGENT_CUPTI_TERM_DRAIN_H_

#include <functional>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace memtrace::cupti {

// Installs the handler and starts the thread that runs `drain` (once per process). Returns
// FAILED_PRECONDITION when SIGTERM already has a handler or is ignored (left alone), UNAVAILABLE
// when the pipe or thread cannot be made. Call once; later calls return ALREADY_EXISTS.
absl::Status InstallTermDrain(std::function<void()> drain, absl::Duration bound);

}  // namespace memtrace::cupti

#endif  // MEMTRACE_AGENT_CUPTI_TERM_DRAIN_H_
