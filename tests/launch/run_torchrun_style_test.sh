#!/bin/sh
# memtrace run around a torchrun-style launcher of 4 workers (each one the agent's Transport):
# the collector ends up with 4 ranks carrying the launcher's identities and the run's job id;
# local collector, generated job id, restarts and two "nodes" sharing one collector.
#   args: MEMTRACE COLLECTOR_BIN WORKER FAKE_TORCHRUN COLLECTOR_VIEW
set -u
MEMTRACE=$1 COLLECTOR_BIN=$2 WORKER=$3 FAKE_TORCHRUN=$4 VIEW=$5
. "$(dirname "$0")/testlib.sh"

check_ranks() {  # check_ranks ADDR JOB N_PER_NODE NODES ATTEMPT
  "$VIEW" "$1" ranks "$2" >"$WORK/ranks" 2>"$WORK/view.err" || fail "collector_view ranks"
  world=$(($3 * $4))
  expect_eq "ranks of $2" "$(wc -l <"$WORK/ranks" | tr -d ' ')" "$world"
  r=0
  while read -r line; do
    expect_eq "rank" "$(field "$line" rank)" "$r"
    expect_eq "local_rank of $r" "$(field "$line" local_rank)" "$((r % $3))"
    expect_eq "world_size of $r" "$(field "$line" world_size)" "$world"
    expect_eq "group_rank of $r" "$(field "$line" group_rank)" "$((r / $3))"
    expect_eq "attempt of $r" "$(field "$line" attempt)" "$5"
    expect_eq "identified_by of $r" "$(field "$line" identified_by)" "env"
    expect_eq "events of $r" "$(field "$line" events)" "40"
    expect_eq "complete of $r" "$(field "$line" complete)" "1"
    r=$((r + 1))
  done <"$WORK/ranks"
}

# 1. Local collector (no --collector), explicit job, 4 workers.
DATA="$WORK/data1"
"$MEMTRACE" run --job exp-1 --data "$DATA" -- "$FAKE_TORCHRUN" 4 "$WORKER" \
  >"$WORK/run1.out" 2>"$WORK/run1.err"
expect_eq "exit code of run 1" "$?" "0"
expect_grep "$WORK/run1.err" "memtrace: local collector at 127.0.0.1:[0-9]*, data $DATA, pid [0-9]*"
expect_grep "$WORK/run1.err" "memtrace: job exp-1 (from --job)"
expect_grep "$WORK/run1.err" "memtrace: job exp-1: 160 events recorded by this run's 4 rank(s) (4 rank(s) in the job)"
expect_grep "$WORK/run1.err" "local collector stopped; data kept in $DATA"
local_addr=$(sed -n 's/.*local collector at \([0-9.:]*\),.*/\1/p' "$WORK/run1.err")
"$VIEW" "$local_addr" jobs >/dev/null 2>&1 && fail "the local collector still answers after the run"
# What the local collector stored survives it: reopen its directory.
start_collector "$DATA"
check_ranks "$COLLECTOR_ADDR" exp-1 4 1 0
stop_collector
echo "ok: local collector, 4 ranks, identities, job id"

# 1b. The same run again into the same data: the collector holds job exp-1's ranks from a run
# that ended. Each worker of the rerun is another process for its rank: the collector stores it
# as the rank's next attempt (it used to refuse it, and the rerun recorded nothing). memtrace run
# says so before the job starts. An attempt given with MEMTRACE_ATTEMPT that is free is used as
# it is, without a note.
"$MEMTRACE" run --job exp-1 --data "$DATA" -- "$FAKE_TORCHRUN" 4 "$WORKER" \
  >"$WORK/run1b.out" 2>"$WORK/run1b.err"
expect_eq "exit code of the rerun" "$?" "0"
expect_grep "$WORK/run1b.err" "memtrace: job exp-1 already holds rank(s) 0,1,2,3 of attempt 0 from a run that ended: this run's workers for them are stored as attempt 1"
expect_grep "$WORK/run1b.err" "memtrace: job exp-1: 160 events recorded by this run's 4 rank(s)"
MEMTRACE_ATTEMPT=5 "$MEMTRACE" run --job exp-1 --data "$DATA" -- "$FAKE_TORCHRUN" 4 "$WORKER" \
  >"$WORK/run1c.out" 2>"$WORK/run1c.err"
expect_eq "exit code of the rerun as attempt 5" "$?" "0"
grep -q "already holds" "$WORK/run1c.err" && fail "attempt 5 is new: no note ($(cat "$WORK/run1c.err"))"
expect_grep "$WORK/run1c.err" "memtrace: job exp-1: 160 events recorded by this run's 4 rank(s)"
start_collector "$DATA"
"$VIEW" "$COLLECTOR_ADDR" ranks exp-1 >"$WORK/ranks1" 2>"$WORK/view.err" || fail "collector_view ranks"
for attempt in 0 1 5; do
  n=0
  while read -r line; do
    [ "$(field "$line" attempt)" = "$attempt" ] || continue
    expect_eq "events of a rank at attempt $attempt" "$(field "$line" events)" "40"
    n=$((n + 1))
  done <"$WORK/ranks1"
  expect_eq "ranks at attempt $attempt" "$n" "4"
done
stop_collector
echo "ok: a rerun under an ended job's id is stored as the next attempt, and said so"

# 1d. A run whose workers were killed left its streams incomplete, not connected: it ended too,
# and its rerun is said to be the next attempt (it was taken for another node still running).
"$MEMTRACE" run --job crash-1 --data "$DATA" -- "$FAKE_TORCHRUN" 2 \
  sh -c '"$0" --hold_ms 5000 & w=$!; sleep 1; kill -KILL "$w"; exit 0' "$WORKER" \
  >"$WORK/run1d.out" 2>"$WORK/run1d.err"
expect_eq "exit code of the run whose workers were killed" "$?" "0"
"$MEMTRACE" run --job crash-1 --data "$DATA" -- "$FAKE_TORCHRUN" 2 "$WORKER" \
  >"$WORK/run1e.out" 2>"$WORK/run1e.err"
expect_eq "exit code of its rerun" "$?" "0"
expect_grep "$WORK/run1e.err" "memtrace: job crash-1 already holds rank(s) 0,1 of attempt 0 from a run that ended: this run's workers for them are stored as attempt 1"
echo "ok: a rerun after a run whose workers were killed is noted"

# 1e2. A process without RANK, run twice under one job: each is a rank of its own (host, device,
# pid), so the rerun is a second rank, not attempt 1 of the first, which the note said it was.
"$MEMTRACE" run --job solo-1 --data "$WORK/data1e2" -- "$WORKER" >"$WORK/solo1.out" 2>"$WORK/solo1.err" \
  || fail "first run of solo-1: $(cat "$WORK/solo1.err")"
"$MEMTRACE" run --job solo-1 --data "$WORK/data1e2" -- "$WORKER" >"$WORK/solo2.out" 2>"$WORK/solo2.err"
expect_eq "exit code of solo-1's rerun" "$?" "0"
grep -q "stored as attempt" "$WORK/solo2.err" && fail "a rankless rerun was said to be the next attempt: $(cat "$WORK/solo2.err")"
expect_grep "$WORK/solo2.err" "WARNING: job solo-1 already holds 1 process(es) without a RANK from a run that ended: without RANK each process is a rank of its own"
start_collector "$WORK/data1e2"
"$VIEW" "$COLLECTOR_ADDR" ranks solo-1 >"$WORK/solo.ranks" 2>"$WORK/view.err" || fail "collector_view ranks solo-1"
expect_eq "ranks of solo-1" "$(wc -l <"$WORK/solo.ranks" | tr -d ' ')" "2"
while read -r line; do
  expect_eq "attempt of a rankless process" "$(field "$line" attempt)" "0"
done <"$WORK/solo.ranks"
stop_collector
echo "ok: a rankless rerun is said to be new ranks, as it is stored"

# 1f. A rerun while another rerun of the same job is still recording: its workers' ranks are
# streamed by the other's processes (moved to attempt 1), so the collector refuses them while
# that runs. Said before the job, not "stored as attempt 2".
start_collector "$WORK/data1f"
"$MEMTRACE" run --collector "$COLLECTOR_ADDR" --job busy-1 -- "$FAKE_TORCHRUN" 2 "$WORKER" \
  >"$WORK/run1f.out" 2>"$WORK/run1f.err" || fail "first run of busy-1"
"$MEMTRACE" run --collector "$COLLECTOR_ADDR" --job busy-1 -- "$FAKE_TORCHRUN" 2 "$WORKER" \
  --hold_ms 4000 >"$WORK/run1g.out" 2>"$WORK/run1g.err" &
holding=$!
sleep 1.5
"$MEMTRACE" run --collector "$COLLECTOR_ADDR" --job busy-1 -- "$FAKE_TORCHRUN" 2 "$WORKER" \
  >"$WORK/run1h.out" 2>"$WORK/run1h.err"
wait "$holding"
expect_grep "$WORK/run1h.err" "WARNING: job busy-1 rank(s) 0,1 are being recorded now by another process"
grep -q "stored as attempt 2" "$WORK/run1h.err" && fail "a refused rerun was said to be stored: $(cat "$WORK/run1h.err")"
stop_collector
echo "ok: a rerun while another one records is warned about"

# 2. Generated job id, restart count 2 is attempt 2 of the same job.
DATA="$WORK/data2"
FAKE_RESTART=2 "$MEMTRACE" run --data "$DATA" "$FAKE_TORCHRUN" 4 "$WORKER" \
  >"$WORK/run2.out" 2>"$WORK/run2.err"
expect_eq "exit code of run 2" "$?" "0"
job=$(grep '^memtrace: job job-' "$WORK/run2.err" | head -n 1 |
  grep -o 'job-[0-9]\{8\}-[0-9]\{6\}-[0-9a-f]\{6\}' | head -n 1)
[ -n "$job" ] || fail "no generated job id printed: $(cat "$WORK/run2.err")"
expect_grep "$WORK/run2.err" "memtrace: job $job (generated"
start_collector "$DATA"
check_ranks "$COLLECTOR_ADDR" "$job" 4 1 2
stop_collector
echo "ok: generated job id $job, attempt from TORCHELASTIC_RESTART_COUNT"

# 2b. A launcher that restarts its workers within one run (torchrun --max_restarts): each rank
# is stored again as its next attempt; the summary counted those as ranks ("4 rank(s)").
"$MEMTRACE" run --job restarted-1 --data "$WORK/data2b" -- sh -c \
  'FAKE_RESTART=0 "$0" 2 "$1" && FAKE_RESTART=1 "$0" 2 "$1"' "$FAKE_TORCHRUN" "$WORKER" \
  >"$WORK/run2b.out" 2>"$WORK/run2b.err"
expect_eq "exit code of the restarted run" "$?" "0"
expect_grep "$WORK/run2b.err" "memtrace: job restarted-1: 160 events recorded by this run's 2 rank(s), 4 rank-attempts after restarts (2 rank(s) in the job)"
echo "ok: a launcher's restarts are counted as attempts, not ranks"

# 3. Two nodes, each `memtrace run --collector ADDR` with the same --job: one job of 8 ranks.
start_collector "$WORK/data3"
for node in 0 1; do
  FAKE_NODE_RANK=$node FAKE_NNODES=2 "$MEMTRACE" run --collector "$COLLECTOR_ADDR" --job two-nodes \
    -- "$FAKE_TORCHRUN" 4 "$WORKER" >"$WORK/node$node.out" 2>"$WORK/node$node.err" &
  eval "pid$node=\$!"
done
wait "$pid0"; rc0=$?
wait "$pid1"; rc1=$?
expect_eq "exit codes of the nodes" "$rc0 $rc1" "0 0"
grep -q "local collector" "$WORK/node0.err" && fail "--collector must not start a local collector"
# Each node counts its own workers' events, not what the other node added to the job meanwhile.
for node in 0 1; do
  expect_grep "$WORK/node$node.err" "memtrace: job two-nodes: 160 events recorded by this run's 4 rank(s)"
done
check_ranks "$COLLECTOR_ADDR" two-nodes 4 2 0
stop_collector
echo "ok: two nodes on one collector, 8 ranks with group ranks 0 and 1"

# 4. A shared collector, and a job id memtrace run does not know (the workers' launcher names
# it): the report counts the job this run's workers wrote to (MEMTRACE_RUN_ID), not another
# team's job that grew meanwhile.
start_collector "$WORK/data4"
FAKE_RUN_ID=other-team MEMTRACE_COLLECTOR="$COLLECTOR_ADDR" \
  "$FAKE_TORCHRUN" 1 "$WORKER" --hold_ms 1500 >"$WORK/other.out" 2>&1 &
other=$!
sleep 0.3
FAKE_RUN_ID=ours "$MEMTRACE" run --collector "$COLLECTOR_ADDR" -- \
  "$FAKE_TORCHRUN" 2 "$WORKER" --hold_ms 3000 >"$WORK/shared.out" 2>"$WORK/shared.err"
expect_eq "exit code on the shared collector" "$?" "0"
wait "$other"
expect_eq "exit code of the other team's job" "$?" "0"
"$VIEW" "$COLLECTOR_ADDR" ranks other-team >"$WORK/other.ranks" 2>/dev/null
expect_eq "the other team's ranks" "$(wc -l <"$WORK/other.ranks" | tr -d ' ')" "1"
expect_grep "$WORK/shared.err" "memtrace: job ours: 80 events recorded by this run's 2 rank(s) (2 rank(s) in the job)"
grep -q "other-team" "$WORK/shared.err" && fail "another job was counted as this run's: $(cat "$WORK/shared.err")"
stop_collector
echo "ok: on a shared collector the report counts this run's job only"
echo PASS
