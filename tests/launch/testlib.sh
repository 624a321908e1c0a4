# Shared helpers of the launcher tests (sourced). Every wait is bounded.

fail() {
  echo "FAIL: $*" >&2
  for f in "$WORK"/*.err; do
    [ -f "$f" ] && { echo "--- $f" >&2; tail -n 30 "$f" >&2; }
  done
  exit 1
}

expect_eq() {  # expect_eq WHAT ACTUAL EXPECTED
  [ "$2" = "$3" ] || fail "$1: got '$2', expected '$3'"
}

expect_grep() {  # expect_grep FILE PATTERN
  grep -q -- "$2" "$1" || fail "'$2' not in $1: $(cat "$1")"
}

# wait_for_file FILE PATTERN SECONDS: until FILE has a line matching PATTERN.
wait_for_line() {
  i=0
  while ! grep -q -- "$2" "$1" 2>/dev/null; do
    i=$((i + 1))
    [ "$i" -gt $(($3 * 20)) ] && fail "timed out waiting for '$2' in $1"
    sleep 0.05
  done
}

# start_collector DATA_DIR: a memtrace-collector of the test's own on a free port.
# Sets COLLECTOR_PID and COLLECTOR_ADDR.
start_collector() {
  rm -f "$WORK/collector.port"
  "$COLLECTOR_BIN" --listen 127.0.0.1:0 --data "$1" --durability async \
    --port_file "$WORK/collector.port" >"$WORK/collector.log" 2>&1 &
  COLLECTOR_PID=$!
  i=0
  while ! grep -q '^[0-9][0-9]*$' "$WORK/collector.port" 2>/dev/null; do
    i=$((i + 1))
    [ "$i" -gt 200 ] && fail "collector did not start: $(cat "$WORK/collector.log")"
    sleep 0.05
  done
  COLLECTOR_ADDR="127.0.0.1:$(cat "$WORK/collector.port")"
}

stop_collector() {
  kill -TERM "$COLLECTOR_PID" 2>/dev/null
  wait "$COLLECTOR_PID" 2>/dev/null
  COLLECTOR_PID=""
}

cleanup() {
  [ -n "${COLLECTOR_PID:-}" ] && kill -KILL "$COLLECTOR_PID" 2>/dev/null
  true
}
trap cleanup EXIT

# field LINE NAME: the value of NAME=... in a collector_view line.
field() {
  echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"
}

WORK="${TEST_TMPDIR:-$(mktemp -d)}/work.$$"
mkdir -p "$WORK"
# memtrace run's temporary directories (and a log a case keeps on purpose) in the test's own
# space, not the machine's /tmp, where each CI run left some.
export TMPDIR="$WORK/tmp"
mkdir -p "$TMPDIR"
# The workers never initialise CUDA, so the driver never loads the agent: any existing file
# stands in for it (keeps these tests independent of the CUDA-only agent build).
AGENT_STANDIN="$WORK/libmemtrace_agent.so"
: >"$AGENT_STANDIN"
export MEMTRACE_AGENT_LIB="$AGENT_STANDIN"
export MEMTRACE_COLLECTOR_BIN="$COLLECTOR_BIN"
unset MEMTRACE_COLLECTOR MEMTRACE_JOB_ID TORCHELASTIC_RUN_ID
