#!/bin/sh
# memtrace run around the real torchrun (Debian's python3-torch; see
# ../shared/notes/launchers.md for why the stream flags are needed): 4 workers, each the
# agent's Transport started by `torchrun --no_python`, end up as 4 ranks of one job.
#   args: MEMTRACE COLLECTOR_BIN WORKER COLLECTOR_VIEW
set -u
MEMTRACE=$1 COLLECTOR_BIN=$2 WORKER=$3 VIEW=$4
. "$(dirname "$0")/testlib.sh"

TORCHRUN=$(command -v torchrun || true)
# tools/setup.sh installs python3-torch, which brings /usr/bin/torchrun.
[ -n "$TORCHRUN" ] || fail "no torchrun on PATH ($PATH): run tools/setup.sh (python3-torch)"
WORKER_ABS=$(cd "$(dirname "$WORKER")" && pwd)/$(basename "$WORKER")

# Which job id the workers get: the launcher's own (TORCHELASTIC_RUN_ID) when the agent has a
# fallback id variable, else the one memtrace run generates (MEMTRACE_JOB_ID overrides).
if "$MEMTRACE" run --dry_run --collector 127.0.0.1:1 -- true | grep -q '^export MEMTRACE_DEFAULT_JOB_ID='; then
  EXPECT=launcher
else
  EXPECT=generated
fi

start_collector "$WORK/data"
timeout 120 "$MEMTRACE" run --collector "$COLLECTOR_ADDR" -- \
  "$TORCHRUN" --redirects 2 --tee 1 --log_dir "$WORK/torchrun-logs" --no_python --standalone \
  --nproc_per_node 4 "$WORKER_ABS" \
  >"$WORK/run.out" 2>"$WORK/run.err"
expect_eq "exit code" "$?" "0"

"$VIEW" "$COLLECTOR_ADDR" jobs >"$WORK/jobs" 2>"$WORK/view.err" || fail "collector_view jobs"
expect_eq "jobs stored" "$(wc -l <"$WORK/jobs" | tr -d ' ')" "1"
job=$(field "$(cat "$WORK/jobs")" job)
if [ "$EXPECT" = launcher ]; then
  # torchrun --standalone sets TORCHELASTIC_RUN_ID to a fresh UUID.
  echo "$job" | grep -Eq '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' ||
    fail "job id '$job' is not torchrun's TORCHELASTIC_RUN_ID (a UUID)"
else
  expect_grep "$WORK/run.err" "memtrace: job $job (generated"
fi
"$VIEW" "$COLLECTOR_ADDR" ranks "$job" >"$WORK/ranks" 2>"$WORK/view.err" || fail "ranks"
expect_eq "ranks" "$(wc -l <"$WORK/ranks" | tr -d ' ')" "4"
r=0
while read -r line; do
  expect_eq "rank" "$(field "$line" rank)" "$r"
  expect_eq "local_rank of $r" "$(field "$line" local_rank)" "$r"
  expect_eq "world_size of $r" "$(field "$line" world_size)" "4"
  expect_eq "group_rank of $r" "$(field "$line" group_rank)" "0"
  expect_eq "attempt of $r" "$(field "$line" attempt)" "0"
  expect_eq "launcher of $r" "$(field "$line" launcher)" "torchrun"
  expect_eq "events of $r" "$(field "$line" events)" "40"
  r=$((r + 1))
done <"$WORK/ranks"
expect_grep "$WORK/run.err" "memtrace: job $job: 160 events recorded by this run's 4 rank(s)"

# --standalone replaces --rdzv_id with a random id: the run must not announce, or count, job
# "exp9" (it ended "no events were recorded for this run").
timeout 120 "$MEMTRACE" run --collector "$COLLECTOR_ADDR" -- \
  "$TORCHRUN" --redirects 2 --tee 1 --log_dir "$WORK/torchrun-logs2" --no_python --standalone \
  --rdzv_id exp9 --nproc_per_node 2 "$WORKER_ABS" \
  >"$WORK/run2.out" 2>"$WORK/run2.err"
expect_eq "exit code with --standalone --rdzv_id" "$?" "0"
grep -q "job exp9" "$WORK/run2.err" && fail "announced torchrun's --rdzv_id, which --standalone replaces: $(cat "$WORK/run2.err")"
expect_grep "$WORK/run2.err" ": 80 events recorded by this run's 2 rank(s)"

# Each worker starts, through a shell, a process of its own that inherits its RANK (as a vLLM
# engine or a compile worker does, also by way of a forkserver), while it streams: stored
# beside the rank as its subprocess, not refused as a second producer of the rank (which lost
# the child's events) nor taken for a rank.
job3=engines-$$
# run_with_children JOB N WORKER_FLAG WHO: 2 workers of JOB started with WORKER_FLAG 16, each
# with a child of 16 events; the run's output in run$N.{out,err}, whose closing line counts the
# children (or parents) as WHO.
run_with_children() {
  timeout 120 "$MEMTRACE" run --collector "$COLLECTOR_ADDR" --job "$1" -- \
    "$TORCHRUN" --redirects 2 --tee 1 --log_dir "$WORK/torchrun-logs$2" --no_python --standalone \
    --nproc_per_node 2 "$WORKER_ABS" "$3" 16 \
    >"$WORK/run$2.out" 2>"$WORK/run$2.err"
  expect_eq "exit code with $3 (run $2)" "$?" "0"
  expect_grep "$WORK/run$2.err" "job $1: 112 events recorded by this run's 2 rank(s) and $4 (2 rank(s) in the job)"
}
run_with_subprocesses() {  # run_with_subprocesses N
  run_with_children "$job3" "$1" --spawn_child "2 subprocess(es) of them"
}
run_with_subprocesses 3
"$VIEW" "$COLLECTOR_ADDR" ranks "$job3" >"$WORK/ranks3" 2>"$WORK/view.err" || fail "ranks of $job3"
expect_eq "streams with subprocesses" "$(wc -l <"$WORK/ranks3" | tr -d ' ')" "4"
for r in 0 1; do
  line=$(grep "^rank=$r " "$WORK/ranks3") || fail "no rank $r: $(cat "$WORK/ranks3")"
  expect_eq "events of rank $r" "$(field "$line" events)" "40"
  expect_eq "rank $r is no subprocess" "$(field "$line" subprocess_of)" "-"
  child=$(grep " subprocess_of=$r\$" "$WORK/ranks3") || fail "no subprocess of rank $r: $(cat "$WORK/ranks3")"
  expect_eq "events of rank $r's subprocess" "$(field "$child" events)" "16"
  expect_eq "complete: rank $r's subprocess" "$(field "$child" complete)" "1"
  [ "$(field "$child" rank)" -ge 1000000 ] || fail "rank $r's subprocess numbered as a launcher rank: $child"
  # What it holds, asked by its own number, and beside its rank.
  sub=$(field "$child" rank)
  "$MEMTRACE" live --collector "$COLLECTOR_ADDR" --job "$job3" --rank "$sub" >"$WORK/live$sub" 2>&1 ||
    fail "memtrace live --rank $sub: $(cat "$WORK/live$sub")"
  expect_grep "$WORK/live$sub" "a subprocess of rank $r (memtrace ranks: $sub)"
  expect_grep "$WORK/live$sub" "^8.00 MiB live in 8 allocations (compared with no rank"
  "$MEMTRACE" live --collector "$COLLECTOR_ADDR" --job "$job3" --rank "$r" >"$WORK/live$r" 2>&1 ||
    fail "memtrace live --rank $r: $(cat "$WORK/live$r")"
  expect_grep "$WORK/live$r" "^and its subprocess pid .* (memtrace ranks: $sub): 8.00 MiB live in 8 allocations"
done
"$MEMTRACE" jobs --collector "$COLLECTOR_ADDR" --format csv >"$WORK/jobs3" || fail "memtrace jobs"
expect_grep "$WORK/jobs3" "^$job3,2,112,.*,0,2,0\$"
# Run again under the job id: each rank's next attempt, as without subprocesses, and this run's
# subprocesses its own (the rerun note counted the first run's as processes without a RANK).
run_with_subprocesses 4
expect_grep "$WORK/run4.err" "job $job3 already holds rank(s) 0,1 of attempt 0 from a run that ended: this run's workers for them are stored as attempt 1"
grep -q "without a RANK" "$WORK/run4.err" && fail "the first run's subprocesses taken for processes without a RANK: $(cat "$WORK/run4.err")"
"$MEMTRACE" jobs --collector "$COLLECTOR_ADDR" --format csv >"$WORK/jobs4" || fail "memtrace jobs"
expect_grep "$WORK/jobs4" "^$job3,2,224,.*,2,4,0\$"

# The other order: each worker's child connects first and holds the rank (an engine that
# initialised CUDA before its parent did); the worker, connecting after it, is stored beside
# it, not refused (which lost the trainer's events) nor taken for a restart.
job5=engines-first-$$
run_children_first() {  # run_children_first N ATTEMPT
  run_with_children "$job5" "$1" --spawn_child_first "the 2 process(es) that started them"
  grep -q "refus" "$WORK/run$1.err" && fail "a worker refused: $(cat "$WORK/run$1.err")"
  # Each worker's agent said once where it is stored (torchrun --redirects 2: in its stderr log).
  expect_eq "workers told they started their rank's process (run $1)" \
    "$(grep -rl "is streamed by a process this one started, which connected first" "$WORK/torchrun-logs$1" | wc -l | tr -d ' ')" "2"
  "$VIEW" "$COLLECTOR_ADDR" ranks "$job5" | grep " attempt=$2 " >"$WORK/ranks$1" || fail "ranks of $job5"
  expect_eq "streams with children first (run $1)" "$(wc -l <"$WORK/ranks$1" | tr -d ' ')" "4"
  for r in 0 1; do
    line=$(grep "^rank=$r " "$WORK/ranks$1") || fail "no rank $r: $(cat "$WORK/ranks$1")"
    expect_eq "events of rank $r (its child's; run $1)" "$(field "$line" events)" "16"
    parent=$(grep " started_the_rank=1 subprocess_of=$r\$" "$WORK/ranks$1") ||
      fail "no process that started rank $r's (run $1): $(cat "$WORK/ranks$1")"
    expect_eq "events of the worker beside rank $r (run $1)" "$(field "$parent" events)" "40"
  done
  # memtrace jobs counts the workers as parents, not as subprocesses or restarts (as the run's
  # closing line does).
  "$MEMTRACE" jobs --collector "$COLLECTOR_ADDR" --format csv >"$WORK/jobs$1" || fail "memtrace jobs"
  expect_grep "$WORK/jobs$1" "^$job5,2,$((112 * ($2 + 1))),.*,$((2 * $2)),0,$((2 * ($2 + 1)))\$"
}
run_children_first 5 0
# Rerun under the job id: the children are the ranks' attempt 1, and each worker, whose Hello
# names attempt 0 as its child's did, is stored beside its child at 1.
run_children_first 6 1
stop_collector
echo "ok: real torchrun, 4 ranks, job $job ($EXPECT id); 2 ranks with a subprocess each, job $job3; children first, job $job5"
echo PASS
