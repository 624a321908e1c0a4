#!/usr/bin/env bash
# The memtrace demo: builds the collector, the workload SIMULATOR and the CLI, starts a collector
# on loopback (OS-chosen port, RocksDB under a temporary or given dir), plays 8 (--ranks) simulated
# ranks of an FSDP-style job with a leak planted on rank 5 (the last rank of fewer than 6) through
# the real agent transport, restarts the collector over the same RocksDB dir, and prints
# `memtrace ranks`, `timeline`, `diverged` and `growth` as read back from it. No GPU is used:
# every event comes from the simulator.
#
# Usage: tools/demo.sh [--data DIR] [--keep] [memtrace-sim flags...]
#   --data DIR   keep the RocksDB dir and logs in DIR (default: a temporary dir, removed at exit)
#   --keep       do not remove the temporary dir
#   --ranks N    simulated ranks (default 8); --job ID: the job id (default sim-demo-<UTC time>)
#   other flags go to memtrace-sim instead of the default scenario "--leak_rank 5"
#   (e.g. tools/demo.sh --oom_rank 3 --oom_step 60, or --grad_accum, --spikes, --phases).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

data=""
keep=0
focus=""
ranks=8
job=""
sim_args=()
usage_error() { echo "tools/demo.sh: $*" >&2; exit 2; }
# The value of flag $1: $2, which must be there and not be another flag.
value_of() {
  [ -n "${2:-}" ] && [ "${2#--}" = "$2" ] || usage_error "$1 needs a value"
  printf '%s' "$2"
}
while (($#)); do
  case "$1" in
    --data) data=$(value_of "$1" "${2:-}") || exit 2; shift 2 ;;
    --data=*) data=$(value_of --data "${1#--data=}") || exit 2; shift ;;
    --keep) keep=1; shift ;;
    --ranks) ranks=$(value_of "$1" "${2:-}") || exit 2; shift 2 ;;
    --ranks=*) ranks=$(value_of --ranks "${1#--ranks=}") || exit 2; shift ;;
    --job) job=$(value_of "$1" "${2:-}") || exit 2; shift 2 ;;
    --job=*) job=$(value_of --job "${1#--job=}") || exit 2; shift ;;
    --collector|--collector=*) usage_error "the demo starts its own collector; --collector is not for it" ;;
    # The comment block under the shebang, whatever its length.
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    --leak_rank|--oom_rank) focus="${2:-0}"; sim_args+=("$1" "${2:-}"); shift 2 || shift ;;
    --leak_rank=*|--oom_rank=*) focus="${1#*=}"; sim_args+=("$1"); shift ;;
    *) sim_args+=("$1"); shift ;;
  esac
done
[[ $ranks =~ ^[1-9][0-9]*$ ]] || usage_error "--ranks needs a positive number, not '$ranks'"
if ((${#sim_args[@]} == 0)); then
  focus=$((ranks > 5 ? 5 : ranks - 1))
  sim_args=(--leak_rank "$focus")
fi
focus="${focus:-0}"

if [ -n "$data" ]; then
  mkdir -p "$data"
  work=$(cd "$data" && pwd)
  keep=1
else
  work=$(mktemp -d "${TMPDIR:-/tmp}/memtrace-demo.XXXXXX")
fi
log="$work/demo.log"  # setup and bazel output
: >"$log"
current_log="$log"    # the log of the running phase, shown on failure
collector_pid=""
sim_pid=""

say() { echo "memtrace demo: $*"; }

stop_collector() {
  if [ -n "$collector_pid" ] && kill -0 "$collector_pid" 2>/dev/null; then
    kill -TERM "$collector_pid" 2>/dev/null || true
    for _ in $(seq 1 100); do
      kill -0 "$collector_pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -0 "$collector_pid" 2>/dev/null && kill -KILL "$collector_pid" 2>/dev/null || true
    wait "$collector_pid" 2>/dev/null || true
  fi
  collector_pid=""
}

cleanup() {
  local rc=$?
  if [ -n "$sim_pid" ]; then
    kill -TERM "$sim_pid" 2>/dev/null || true
    wait "$sim_pid" 2>/dev/null || true
  fi
  stop_collector
  if [ "$rc" -ne 0 ]; then
    say "FAILED (exit $rc); last lines of $current_log:"
    grep -v 'linux-sandbox' "$current_log" | tail -n 15 | sed 's/^/  | /' >&2 || true
    keep=1
  fi
  if [ "$keep" -eq 1 ]; then
    say "data and logs kept in $work"
  else
    rm -rf "$work"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

say "[1/6] checking packages (tools/setup.sh)"
./tools/setup.sh >>"$log" 2>&1

say "[2/6] building collector, simulator and CLI with bazel (log: $log)"
bazel build //collector:memtrace-collector //tools/sim:memtrace-sim //query/cli:memtrace \
  >>"$log" 2>&1
bin="$ROOT/bazel-bin"
COLLECTOR="$bin/collector/memtrace-collector"
SIM="$bin/tools/sim/memtrace-sim"
MEMTRACE="$bin/query/cli/memtrace"

start_collector() {
  local port_file="$work/collector.port"
  rm -f "$port_file"
  current_log="$work/collector.log"
  "$COLLECTOR" --listen 127.0.0.1:0 --data "$work/rocksdb" --port_file "$port_file" \
    >>"$work/collector.log" 2>&1 &
  collector_pid=$!
  for _ in $(seq 1 300); do
    if [ -s "$port_file" ]; then
      port=$(tr -dc '0-9' <"$port_file")
      [ -n "$port" ] && return 0
    fi
    if ! kill -0 "$collector_pid" 2>/dev/null; then
      say "the collector exited during start-up (see $work/collector.log)" >&2
      return 1
    fi
    sleep 0.1
  done
  say "the collector wrote no port to $port_file within 30 s" >&2
  return 1
}

say "[3/6] starting the collector on 127.0.0.1 (RocksDB in $work/rocksdb)"
start_collector
addr="127.0.0.1:$port"
say "      collector listening on $addr"

job="${job:-sim-demo-$(date -u +%Y%m%d-%H%M%S)}"
say "[4/6] SIMULATOR: playing $ranks simulated ranks (${sim_args[*]}) into $addr"
current_log="$work/sim.log"
# In the background and waited for, so that a signal reaches the traps at once.
"$SIM" --collector "$addr" --job "$job" --ranks "$ranks" "${sim_args[@]}" >"$current_log" 2>&1 &
sim_pid=$!
wait "$sim_pid"
sim_pid=""
grep -E 'planted:|durable at' "$current_log" | sed 's/^/      /'

say "[5/6] restarting the collector over the same RocksDB dir: what follows is read from disk"
stop_collector
start_collector
addr="127.0.0.1:$port"

say "[6/6] memtrace ranks / timeline / diverged / growth from the collector at $addr"
current_log="$work/collector.log"
export MEMTRACE_COLLECTOR="$addr"
echo
echo "\$ memtrace ranks --job $job"
"$MEMTRACE" ranks --job "$job"
echo
# A column per rank: of many ranks, the first few and the one in focus.
wide_ranks=()
if ((ranks > 16)); then
  wide_ranks=(--rank "0-3,$focus")
fi
echo "\$ memtrace timeline --job $job ${wide_ranks[*]:+${wide_ranks[*]} }--wide --every 10   # end-of-step live bytes per rank"
"$MEMTRACE" timeline --job "$job" "${wide_ranks[@]}" --wide --every 10
echo
echo "\$ memtrace timeline --job $job --rank $focus --every 10"
"$MEMTRACE" timeline --job "$job" --rank "$focus" --every 10
echo
echo "\$ memtrace diverged --job $job"
"$MEMTRACE" diverged --job "$job"
echo
echo "\$ memtrace growth --job $job --by tag,rank"
"$MEMTRACE" growth --job "$job" --by tag,rank
echo
if [ "$keep" -eq 1 ]; then
  say "done; the collector is stopped. To query this job again:"
  say "  $COLLECTOR --listen 127.0.0.1:7431 --data $work/rocksdb &"
  say "  $MEMTRACE timeline --job $job --rank $focus --format csv"
else
  say "done; the collector is stopped and its temporary RocksDB dir removed (--keep keeps it)."
fi
