// Whether this process is a fork() of the one the agent started in. A forked child (a
// DataLoader worker) inherits the CUPTI subscription and the NVTX injection, but not the agent's
// threads, and may inherit its mutexes held by a parent thread at the fork: a callback taking
// one would deadlock the child, and the events it records have no sender. So the CUPTI
// trampolines do nothing in a child.
#ifndef MEMTRACE_AGENT_CUPTI_FORK_GUARD_H_
#define MEMTRACE_AGENT_CUPTI_FORK_GUARD_H_

namespace memtrace::cupti {

// Registers the pthread_atfork child handler that marks the process as forked (once; later
// calls do nothing). Thread-safe.
void InstallForkGuard();

// True in a child forked after InstallForkGuard(). One relaxed atomic load.
bool InForkedChild();

}  // namespace memtrace::cupti

#endif  // MEMTRACE_AGENT_CUPTI_FORK_GUARD_H_
