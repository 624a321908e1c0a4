#!/bin/bash
# memtrace-collector as a process: --help, flag errors, the ready line, --port_file, a TCP
# connection to the chosen port, clean exit on SIGTERM and SIGINT, restart on the same data.
set -u
BIN="${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-memtrace}/collector/memtrace-collector"
[[ -x "$BIN" ]] || BIN="$(dirname "$0")/memtrace-collector"
TMP="${TEST_TMPDIR:-$(mktemp -d)}"
fail() { echo "FAIL: $*" >&2; exit 1; }

# --help names every flag and is honest about --data being required.
help="$("$BIN" --help 2>&1)"
for flag in listen data durability max_message_bytes bucket_ms checkpoint_every_steps \
            checkpoint_every_events query_threads port_file; do
  grep -q -- "-$flag" <<<"$help" || fail "--help does not mention --$flag: $help"
done
grep -q "required" <<<"$help" || fail "--help does not say --data is required"

"$BIN" --help >/dev/null 2>&1; rc=$?
[[ $rc -eq 0 ]] || fail "--help exited $rc"

# A flag it does not know, or an argument that is not a flag: a bad command line, exit 2.
out="$("$BIN" --listen 127.0.0.1:0 --data "$TMP/x" --nosuchflag=1 2>&1)"; rc=$?
[[ $rc -eq 2 ]] && grep -q -- "unknown flag --nosuchflag" <<<"$out" || fail "unknown flag: rc $rc: $out"
out="$("$BIN" --listen 127.0.0.1:0 "$TMP/x" 2>&1)"; rc=$?
[[ $rc -eq 2 ]] && grep -q -- "unexpected argument '$TMP/x'" <<<"$out" ||
    fail "stray argument: rc $rc: $out"

# Missing --data: exit 2 with a clear message.
out="$("$BIN" --listen 127.0.0.1:0 2>&1)"; rc=$?
[[ $rc -eq 2 ]] || fail "missing --data exited $rc"
grep -q -- "--data DIR is required" <<<"$out" || fail "missing --data message: $out"

# Unusable data directory (a file is in the way).
touch "$TMP/a-file"
out="$("$BIN" --listen 127.0.0.1:0 --data "$TMP/a-file/db" 2>&1)"; rc=$?
[[ $rc -eq 2 ]] || fail "unusable --data exited $rc"
grep -q "$TMP/a-file/db" <<<"$out" || fail "unusable --data message does not name it: $out"

out="$("$BIN" --listen 127.0.0.1:0 --data "$TMP/x" --durability maybe 2>&1)"; rc=$?
[[ $rc -eq 2 ]] && grep -q "maybe" <<<"$out" || fail "bad --durability: rc $rc: $out"

out="$("$BIN" --listen 127.0.0.1:0 --data "$TMP/x" --query_threads=-1 2>&1)"; rc=$?
[[ $rc -eq 2 ]] && grep -q -- "--query_threads -1 is not in 0..256" <<<"$out" ||
    fail "bad --query_threads: rc $rc: $out"
# Limits that would refuse every agent's batches (0 strings) are not "unbounded": refused; nor
# are limits below what an agent's batch holds in the normal course (found accepted, each
# storing nothing and logging nothing).
for flag in max_string_table max_strings_per_batch max_string_bytes; do
  out="$("$BIN" --listen 127.0.0.1:0 --data "$TMP/x" --$flag=0 2>&1)"; rc=$?
  [[ $rc -eq 2 ]] && grep -q -- "--$flag 0 is not in " <<<"$out" ||
      fail "--$flag=0: rc $rc: $out"
done
for bad in max_string_bytes=4 max_strings_per_batch=1 max_string_table=3 max_message_bytes=10000; do
  out="$(timeout 10 "$BIN" --listen 127.0.0.1:0 --data "$TMP/x" --$bad 2>&1)"; rc=$?
  [[ $rc -eq 2 ]] && grep -q -- "refused and resent forever" <<<"$out" || fail "--$bad: rc $rc: $out"
done
# A batch limit below the agents' batch size would refuse (and they resend) every full batch.
# (timeout: a collector that accepted it would serve until killed.)
out="$(timeout 10 "$BIN" --listen 127.0.0.1:0 --data "$TMP/x" --max_batch_events=100 2>&1)"; rc=$?
[[ $rc -eq 2 ]] && grep -q -- "--max_batch_events 100 is not in 16384.*agents send batches" \
    <<<"$out" || fail "--max_batch_events=100: rc $rc: $out"
grep -q "MEMTRACE_BATCH_EVENTS" <<<"$help" || fail "--help does not mention MEMTRACE_BATCH_EVENTS"
# A value given apart from its flag is read as its value, also a negative one ("--5" was said to
# be an unknown flag), and one Abseil cannot parse is a usage error like the rest (it exited 1).
out="$("$BIN" --listen 127.0.0.1:0 --data "$TMP/x" --bucket_ms -5 2>&1)"; rc=$?
[[ $rc -eq 2 ]] && grep -q -- "--bucket_ms -5 is not in 1.." <<<"$out" || fail "--bucket_ms -5: rc $rc: $out"
out="$("$BIN" --listen 127.0.0.1:0 --data "$TMP/x" --bucket_ms abc 2>&1)"; rc=$?
[[ $rc -eq 2 ]] && grep -q -- "--bucket_ms: Illegal value 'abc'" <<<"$out" || fail "--bucket_ms abc: rc $rc: $out"
touch "$TMP/a-file"
out="$("$BIN" --listen 127.0.0.1:0 --data "$TMP/a-file" 2>&1)"; rc=$?
[[ $rc -eq 2 ]] && grep -q -- "data directory $TMP/a-file exists and is not a directory" <<<"$out" ||
    fail "--data FILE: rc $rc: $out"
out="$("$BIN" --listen 127.0.0.1:0 --data "$TMP/x" --bucket_ms=2000000000000 2>&1)"; rc=$?
[[ $rc -eq 2 ]] && grep -q -- "--bucket_ms 2000000000000 is not in 1..1099511627776" <<<"$out" ||
    fail "--bucket_ms too large: rc $rc: $out"

start() {  # start DATA SIGNAL: runs, checks the ready line and port, stops with SIGNAL
  local data="$1" sig="$2"
  rm -f "$TMP/port" "$TMP/stdout" "$TMP/stderr"
  "$BIN" --listen 127.0.0.1:0 --data "$data" --port_file "$TMP/port" \
      >"$TMP/stdout" 2>"$TMP/stderr" &
  local pid=$!
  for _ in $(seq 100); do [[ -s "$TMP/port" ]] && break; sleep 0.05; done
  [[ -s "$TMP/port" ]] || { kill -9 $pid; fail "no port file: $(cat "$TMP/stderr")"; }
  local port; port="$(cat "$TMP/port")"
  [[ "$port" =~ ^[0-9]+$ && "$port" -gt 0 ]] || fail "port file holds '$port'"
  for _ in $(seq 100); do [[ -s "$TMP/stdout" ]] && break; sleep 0.05; done
  grep -qx "memtrace-collector listening on 127.0.0.1:$port, data $data" "$TMP/stdout" ||
      fail "ready line: $(cat "$TMP/stdout")"
  (exec 3<>"/dev/tcp/127.0.0.1/$port") || fail "cannot connect to port $port"
  kill -"$sig" $pid
  if [[ "$sig" == KILL ]]; then wait $pid 2>/dev/null; return; fi
  local waited=0
  while kill -0 $pid 2>/dev/null && [[ $waited -lt 100 ]]; do sleep 0.05; waited=$((waited+1)); done
  kill -0 $pid 2>/dev/null && { kill -9 $pid; fail "still running 5 s after SIG$sig"; }
  wait $pid; local rc=$?
  [[ $rc -eq 0 ]] || fail "exit status $rc after SIG$sig: $(cat "$TMP/stderr")"
  grep -q "stopped" "$TMP/stderr" || fail "no 'stopped' line: $(cat "$TMP/stderr")"
}

start "$TMP/data" TERM
# The same store opens again (the lock was released) and stops on SIGINT too.
start "$TMP/data" INT
# After kill -9 the store opens again (RocksDB recovers from its WAL).
start "$TMP/data" KILL
start "$TMP/data" TERM
# MEMTRACE_TOKEN set but empty (e.g. "$(cat missing-file)") means no token: said in so many words.
MEMTRACE_TOKEN= start "$TMP/data" TERM
grep -q "MEMTRACE_TOKEN is set but empty" "$TMP/stderr" || fail "no empty-token warning: $(cat "$TMP/stderr")"
echo PASS
