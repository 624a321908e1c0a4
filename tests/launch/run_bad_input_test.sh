#!/bin/sh
# memtrace run on bad input: each a clear message, and the job's own exit code unchanged.
#   args: MEMTRACE COLLECTOR_BIN WORKER FAKE_TORCHRUN COLLECTOR_VIEW
set -u
MEMTRACE=$1 COLLECTOR_BIN=$2 WORKER=$3 FAKE_TORCHRUN=$4 VIEW=$5
. "$(dirname "$0")/testlib.sh"

# A port nothing listens on: bind a collector, note its port, stop it.
start_collector "$WORK/data-closed"
CLOSED=$COLLECTOR_ADDR
stop_collector

# 1. A command that does not exist: 127 like a shell, and no collector started for it.
"$MEMTRACE" run --data "$WORK/d1" -- no-such-command-xyz --flag >"$WORK/c1.out" 2>"$WORK/c1.err"
expect_eq "exit code for a missing command" "$?" "127"
expect_grep "$WORK/c1.err" "memtrace run: command not found: no-such-command-xyz"
grep -q "local collector" "$WORK/c1.err" && fail "a collector was started for a missing command"
printf 'data' >"$WORK/not-executable"
"$MEMTRACE" run --collector "$CLOSED" --timeout 200ms -- "$WORK/not-executable" \
  >"$WORK/c1b.out" 2>"$WORK/c1b.err"
expect_eq "exit code for a non-executable file" "$?" "126"
echo "ok: missing command 127, non-executable 126"

# 2. The job's exit code passes through unchanged; a signal death is 128 + signal.
"$MEMTRACE" run --data "$WORK/d2" -- sh -c 'exit 3' >"$WORK/c2.out" 2>"$WORK/c2.err"
expect_eq "exit code 3" "$?" "3"
"$MEMTRACE" run --data "$WORK/d2" -- sh -c 'kill -KILL $$' >"$WORK/c2b.out" 2>"$WORK/c2b.err"
expect_eq "exit code of a SIGKILLed job" "$?" "137"
expect_grep "$WORK/c2b.err" "the job was killed by signal 9"
FAKE_RUN_ID=x "$MEMTRACE" run --data "$WORK/d2" -- "$FAKE_TORCHRUN" 4 "$WORKER" --exit_code 5 \
  >"$WORK/c2c.out" 2>"$WORK/c2c.err"
expect_eq "exit code of a launcher whose workers fail" "$?" "5"
echo "ok: exit codes 3, 137, 5 returned unchanged"

# 3. Unreachable collector: a loud warning, and the job still runs to its own exit code.
start=$(date +%s)
"$MEMTRACE" run --collector "$CLOSED" --timeout 500ms --job unreachable -- \
  "$FAKE_TORCHRUN" 2 "$WORKER" --exit_code 4 >"$WORK/c3.out" 2>"$WORK/c3.err"
expect_eq "exit code with an unreachable collector" "$?" "4"
expect_grep "$WORK/c3.err" "WARNING: cannot reach collector at $CLOSED"
expect_grep "$WORK/c3.err" "Running the job anyway"
expect_grep "$WORK/c3.err" "was unreachable when the job started"
[ $(($(date +%s) - start)) -lt 30 ] || fail "an unreachable collector made the run slow"
"$MEMTRACE" run --collector no-such-host.invalid:7431 --timeout 500ms --no_agent -- true \
  >"$WORK/c3b.out" 2>"$WORK/c3b.err"
expect_eq "exit code with an unresolvable collector" "$?" "0"
expect_grep "$WORK/c3b.err" "cannot reach collector at no-such-host.invalid:7431"
echo "ok: unreachable collector warned about, job ran"

# 4. The agent library cannot be found: an error before anything starts, unless --no_agent.
MEMTRACE_AGENT_LIB="$WORK/nope.so" "$MEMTRACE" run --collector "$CLOSED" -- true \
  >"$WORK/c4.out" 2>"$WORK/c4.err"
expect_eq "exit code without the agent" "$?" "1"
expect_grep "$WORK/c4.err" "agent library '$WORK/nope.so' (from MEMTRACE_AGENT_LIB) does not exist"
expect_grep "$WORK/c4.err" "--no_agent"
MEMTRACE_AGENT_LIB="$WORK/nope.so" "$MEMTRACE" run --no-agent --collector "$CLOSED" \
  --timeout 200ms -- sh -c 'test -z "$CUDA_INJECTION64_PATH"' >"$WORK/c4b.out" 2>"$WORK/c4b.err"
expect_eq "--no-agent runs the job without injection" "$?" "0"
echo "ok: missing agent library is an error naming it; --no-agent runs untraced"

# 5. The local collector is killed mid-job: the job keeps running, its exit code is kept, and
# the run says what happened.
"$MEMTRACE" run --data "$WORK/d5" --job killed -- "$FAKE_TORCHRUN" 2 "$WORKER" --hold_ms 2500 \
  --exit_code 3 >"$WORK/c5.out" 2>"$WORK/c5.err" &
run=$!
wait_for_line "$WORK/c5.err" "local collector at" 20
cpid=$(sed -n 's/.*local collector at .*, pid \([0-9]*\)$/\1/p' "$WORK/c5.err")
sleep 0.5
kill -KILL "$cpid" || fail "cannot kill the local collector $cpid"
wait "$run"
expect_eq "exit code after the collector died" "$?" "3"
expect_grep "$WORK/c5.err" "WARNING: the local collector (pid $cpid) killed by signal 9 (Killed) during the job"
expect_grep "$WORK/c5.err" "before the job ended"
# The log the warning names is still there to read.
log=$(sed -n 's/.*Its log (\(.*collector\.log\), kept).*/\1/p' "$WORK/c5.err" | head -1)
[ -n "$log" ] && [ -f "$log" ] || fail "the dead collector's log ($log) was removed"
echo "ok: local collector killed mid-job reported, exit code kept"

# 6. A remote collector that dies mid-job: noticed by the health checks and reported at the end.
start_collector "$WORK/d6"
"$MEMTRACE" run --collector "$COLLECTOR_ADDR" --health_interval 200ms --job remote-killed -- \
  "$FAKE_TORCHRUN" 2 "$WORKER" --hold_ms 2000 >"$WORK/c6.out" 2>"$WORK/c6.err" &
run=$!
sleep 1
kill -KILL "$COLLECTOR_PID"
wait "$COLLECTOR_PID" 2>/dev/null
COLLECTOR_PID=""
wait "$run"
expect_eq "exit code after the remote collector died" "$?" "0"
expect_grep "$WORK/c6.err" "unreachable 1 time(s) while it ran"
expect_grep "$WORK/c6.err" "still unreachable at the end"
echo "ok: remote collector death reported"

# 7. SIGTERM sent to memtrace run reaches the job, which decides its exit code; the local
# collector is stopped afterwards.
"$MEMTRACE" run --data "$WORK/d7" -- sh -c \
  'trap "echo TERM >'"$WORK"'/got-term; exit 42" TERM; echo ready; while :; do sleep 0.05; done' \
  >"$WORK/c7.out" 2>"$WORK/c7.err" &
run=$!
wait_for_line "$WORK/c7.out" "ready" 20
kill -TERM "$run"
wait "$run"
expect_eq "exit code of the job after SIGTERM" "$?" "42"
[ -f "$WORK/got-term" ] || fail "the job did not receive SIGTERM"
expect_grep "$WORK/c7.err" "passed signal 15"
expect_grep "$WORK/c7.err" "local collector stopped"
# And a job that does not handle it dies of it: 128 + 15.
"$MEMTRACE" run --collector "$CLOSED" --timeout 200ms --no_agent -- sh -c 'echo ready; exec sleep 30' \
  >"$WORK/c7b.out" 2>"$WORK/c7b.err" &
run=$!
wait_for_line "$WORK/c7b.out" "ready" 20
kill -TERM "$run"
wait "$run"
expect_eq "exit code of a job killed by the forwarded SIGTERM" "$?" "143"
echo "ok: SIGTERM forwarded"

# 7c. Without a terminal (a batch scheduler, setsid) a SIGINT sent to memtrace run's
# whole process group reaches the job once, and so does one sent to memtrace run alone; the
# job's worker (a process of the job's group, like torchrun's) gets it once too. The job counts
# each delivery (a byte on Python's wakeup fd per signal: its handler may run once for two).
cat >"$WORK/count_sigint.py" <<'PY'
import os, select, signal, subprocess, sys, time
out, workers = sys.argv[1], int(sys.argv[2])
r, w = os.pipe()
os.set_blocking(w, False)
signal.signal(signal.SIGINT, lambda *_: None)
signal.set_wakeup_fd(w)
children = [subprocess.Popen([sys.executable, sys.argv[0], out + ".worker", "0"],
                             stdout=subprocess.PIPE) for _ in range(workers)]
for child in children:
    child.stdout.readline()
print("ready", flush=True)
count, first, end = 0, None, time.time() + 20
# A second copy would come right after the first: wait 1.5 s for it.
while time.time() < end and (first is None or time.time() < first + 1.5):
    if select.select([r], [], [], 0.05)[0]:
        count += len(os.read(r, 64))
        first = first or time.time()
with open(out, "w") as f:
    f.write("%d\n" % count)
for child in children:
    child.wait()
PY
# start_in_new_session OUT ERR COMMAND...: COMMAND in a session and process group of its own,
# without a terminal. Sets RUN, its pid and group id. A background command of this shell starts
# with SIGINT and SIGQUIT ignored (POSIX, without job control): put back first.
start_in_new_session() {
  out=$1 err=$2
  shift 2
  python3 -c 'import os, signal, sys
for s in (signal.SIGINT, signal.SIGQUIT):
    signal.signal(s, signal.SIG_DFL)
os.setsid()
os.execvp(sys.argv[1], sys.argv[1:])' "$@" >"$out" 2>"$err" &
  RUN=$!
}
for target in group process; do
  start_in_new_session "$WORK/c7c-$target.out" "$WORK/c7c-$target.err" "$MEMTRACE" run \
    --collector "$CLOSED" --timeout 200ms --no_agent -- \
    python3 "$WORK/count_sigint.py" "$WORK/count-$target" 1
  wait_for_line "$WORK/c7c-$target.out" "ready" 20
  expect_eq "memtrace run's process group" "$(ps -o pgid= -p "$RUN" | tr -d ' ')" "$RUN"
  if [ "$target" = group ]; then kill -INT "-$RUN"; else kill -INT "$RUN"; fi
  wait "$RUN"
  expect_eq "exit code after a SIGINT to the $target" "$?" "0"
  expect_eq "SIGINTs the job got, sent to memtrace run's $target" "$(cat "$WORK/count-$target")" "1"
  expect_eq "SIGINTs the job's worker got, sent to memtrace run's $target" \
    "$(cat "$WORK/count-$target.worker")" "1"
  expect_grep "$WORK/c7c-$target.err" "passed signal 2"
done
echo "ok: without a terminal, a SIGINT to memtrace run's group or to it reaches the job once"

# 7d. In a terminal, a run started with `&` and brought back with `fg` gets the terminal, its
# job included: the job, stopped on SIGTTIN as it read in the background, reads a line typed
# after `fg` (a job of a group of its own would have stopped for good). Started by the shell
# itself, and under a subshell that leads the group. An interactive bash on a pseudo-terminal,
# driven as a user would type.
cat >"$WORK/fg_job.py" <<'PY'
import os, pty, re, select, signal, subprocess, sys, time
command_line, out_path = sys.argv[1:3]
pid, fd = pty.fork()
if pid == 0:
    os.execvp("bash", ["bash", "--norc", "--noprofile", "-i"])
seen = b""
def read_until(pattern, seconds):
    global seen
    end = time.time() + seconds
    while not re.search(pattern.encode(), seen) and time.time() < end:
        if select.select([fd], [], [], 0.1)[0]:
            try:
                seen += os.read(fd, 4096)
            except OSError:
                return
def type_line(line):
    os.write(fd, (line + "\n").encode())
type_line(command_line + " &")
# The job's own line (the echo of the typed one has "$((6*7))"): it reads next, in the background.
read_until("ready:42", 20)
time.sleep(0.5)
type_line("fg")
time.sleep(1)
type_line("hello")
read_until("got:hello", 10)
# Typed ahead: bash reads it once memtrace run has ended (the echo of the typed line has "$?").
type_line("echo exit-code:$?")
read_until("exit-code:[0-9]", 20)
# Everything of the terminal's session, a job stopped for good included (the shell leads it).
subprocess.call(["pkill", "-KILL", "-s", str(pid)])
os.kill(pid, signal.SIGKILL)
os.waitpid(pid, 0)
with open(out_path, "wb") as f:
    f.write(seen)
PY
FG_RUN="$MEMTRACE run --collector $CLOSED --timeout 200ms --no_agent -- \
bash -c 'echo ready:\$((6*7)); read x; echo got:\$x; exit 7'"
for form in shell subshell; do
  if [ "$form" = shell ]; then line=$FG_RUN; else line="( $FG_RUN; exit \$? )"; fi
  python3 "$WORK/fg_job.py" "$line" "$WORK/c7d-$form.out"
  expect_grep "$WORK/c7d-$form.out" "got:hello"
  expect_grep "$WORK/c7d-$form.out" "exit-code:7"
done
echo "ok: a run started with & (by the shell or a subshell) and brought back with fg reads the terminal"

# 7e. The terminal of a run started with `&` closes: the shell sends SIGHUP to the job's group,
# and the job gets it once: memtrace run does not pass the shell's copy on again (it would say
# so on stderr; two copies close together may also reach a handler as one).
cat >"$WORK/hup_job.py" <<'PY'
import os, pty, select, subprocess, sys, time
command_line = sys.argv[1]
pid, fd = pty.fork()
if pid == 0:
    os.execvp("bash", ["bash", "--norc", "--noprofile", "-i"])
seen, end = b"", time.time() + 20
os.write(fd, (command_line + " &\n").encode())
while b"ready:42" not in seen and time.time() < end:
    if select.select([fd], [], [], 0.1)[0]:
        try:
            seen += os.read(fd, 4096)
        except OSError:
            break
os.close(fd)  # the terminal goes away: the kernel hangs up the shell, which hangs up its jobs
end = time.time() + 20
while time.time() < end and os.waitpid(pid, os.WNOHANG) == (0, 0):
    time.sleep(0.1)
if time.time() >= end:  # the shell outlived its terminal: end its whole session
    subprocess.call(["pkill", "-KILL", "-s", str(pid)])
sys.exit(0 if b"ready:42" in seen else "the job never started: " + seen.decode(errors="replace"))
PY
cat >"$WORK/count_sighup.py" <<'PY'
import signal, sys, time
count = [0]
def counted(*_):
    count[0] += 1
signal.signal(signal.SIGHUP, counted)
print("ready:%d" % (6 * 7), flush=True)
# Until a second after the first SIGHUP (a second copy would come right after), 20 s at most.
end = first = time.time() + 20
while time.time() < end:
    if count[0] > 0:
        end = min(end, first + 1)
    else:
        first = time.time()
    time.sleep(0.05)
with open(sys.argv[1], "w") as f:
    f.write("%d\n" % count[0])
PY
python3 "$WORK/hup_job.py" "$MEMTRACE run --collector $CLOSED --timeout 200ms --no_agent -- \
python3 $WORK/count_sighup.py $WORK/c7e.count 2>$WORK/c7e.err" || fail "7e: the job did not start"
wait_for_line "$WORK/c7e.count" "[0-9]" 25
expect_eq "SIGHUPs the job got when its terminal closed" "$(cat "$WORK/c7e.count")" "1"
grep -q "passed signal 1 " "$WORK/c7e.err" && fail "memtrace run passed the shell's SIGHUP on"
echo "ok: a closed terminal's hangup reaches a background run's job once"

# 8a. A local collector for workers on other nodes (a wildcard listen address) starts, in
# plaintext with a warning, and the job runs (the collector refuses plaintext off loopback unless
# told it may, and memtrace run did not tell it: the job never started).
"$MEMTRACE" run --no_agent --listen 0.0.0.0:0 --data "$WORK/d8a" -- sh -c 'exit 5' \
  >"$WORK/c8a.out" 2>"$WORK/c8a.err"
expect_eq "exit code with a wildcard listen address" "$?" "5"
expect_grep "$WORK/c8a.err" "in plaintext: anyone on the network can read the traces"
echo "ok: wildcard listen starts a plaintext local collector, job ran"

# 8b. Started with SIGCHLD ignored (inherited from a parent that ignores it): the job's exit code
# still comes back (the kernel reaped the job itself and memtrace run returned 0).
python3 -c 'import os, signal, sys
signal.signal(signal.SIGCHLD, signal.SIG_IGN)
os.execv(sys.argv[1], sys.argv[1:])' "$MEMTRACE" run --no_agent --data "$WORK/d8b" -- sh -c 'exit 3' \
  >"$WORK/c8b.out" 2>"$WORK/c8b.err"
expect_eq "exit code when SIGCHLD was ignored" "$?" "3"
echo "ok: an inherited ignored SIGCHLD does not lose the exit code"

# 9. A collector that refuses the run's token (its health check answers without one): said before
# the job starts, and the job still runs with its own exit code.
export MEMTRACE_TOKEN=right-token
start_collector "$WORK/d9"
unset MEMTRACE_TOKEN
MEMTRACE_TOKEN=wrong-token "$MEMTRACE" run --collector "$COLLECTOR_ADDR" --no_agent --job tok -- \
  sh -c 'exit 4' >"$WORK/c9.out" 2>"$WORK/c9.err"
expect_eq "exit code with a refused token" "$?" "4"
expect_grep "$WORK/c9.err" "refuses this token"
stop_collector
echo "ok: a refused token is reported before the job"

# 10. A --data DIR another collector holds: the job still runs, recorded into a temporary
# directory, and the run says so.
start_collector "$WORK/d10"
"$MEMTRACE" run --data "$WORK/d10" --no_agent -- sh -c 'exit 6' >"$WORK/c10.out" 2>"$WORK/c10.err"
expect_eq "exit code with a --data DIR in use" "$?" "6"
expect_grep "$WORK/c10.err" "could not use $WORK/d10 (--data)"
expect_grep "$WORK/c10.err" "no events were recorded for this run (--no_agent: it ran untraced)"
# The --listen port taken is no problem of the directory: no fallback blaming it, no temporary
# directory left behind; a --listen that is not HOST:PORT is a usage error.
tmp_before=$(ls -d "${TMPDIR:-/tmp}"/memtrace-run-* 2>/dev/null | wc -l)
"$MEMTRACE" run --data "$WORK/d10b" --listen "$COLLECTOR_ADDR" --no_agent -- sh -c 'exit 6' \
  >"$WORK/c10b.out" 2>"$WORK/c10b.err"
expect_eq "exit code with the --listen port taken" "$?" "1"
expect_grep "$WORK/c10b.err" "cannot listen on $COLLECTOR_ADDR"
grep -q "could not use" "$WORK/c10b.err" && fail "the data directory was blamed: $(cat "$WORK/c10b.err")"
expect_eq "temporary directories left" "$(ls -d "${TMPDIR:-/tmp}"/memtrace-run-* 2>/dev/null | wc -l)" "$tmp_before"
"$MEMTRACE" run --data "$WORK/d10b" --listen bad --no_agent -- true >"$WORK/c10c.out" 2>"$WORK/c10c.err"
expect_eq "exit code for --listen bad" "$?" "2"
expect_grep "$WORK/c10c.err" "memtrace run: --listen='bad': expected host:port"
stop_collector
echo "ok: a --data DIR in use falls back to a temporary directory; a taken or bad --listen does not"

# 11. A collector address without a valid port is a bad command line, not "unreachable".
"$MEMTRACE" run --collector 127.0.0.1:99999 -- true >"$WORK/c11.out" 2>"$WORK/c11.err"
expect_eq "exit code with a bad --collector" "$?" "2"
expect_grep "$WORK/c11.err" "port must be 1..65535"

# 12. Awkward words in the command: a dry run prints lines a shell runs as given.
"$MEMTRACE" run --dry_run --job dry -- printf '%s|' "two words" "it's" 'FOO=bar' '$HOME' '' \
  >"$WORK/c12.out" 2>"$WORK/c12.err"
expect_eq "exit code of a dry run" "$?" "0"
sed '$d' "$WORK/c12.out" >"$WORK/c12.env"
tail -n 1 "$WORK/c12.out" >"$WORK/c12.cmd"
got=$(sh -c ". '$WORK/c12.env'; . '$WORK/c12.cmd'")
expect_eq "the dry run's command, run by a shell" "$got" "two words|it's|FOO=bar|\$HOME||"
got=$(env -u MEMTRACE_COLLECTOR sh -c ". '$WORK/c12.env'; printf '%s' \"\${MEMTRACE_COLLECTOR-unset}\"")
expect_eq "the dry run's collector, read by a shell" "$got" "unset"
# Exported, so that the command sees them (they were shell variables only).
got=$(env -u MEMTRACE_JOB_ID sh -c ". '$WORK/c12.env'; sh -c 'printf %s \"\${MEMTRACE_JOB_ID-unset}\"'")
expect_eq "the dry run's job id, seen by the command" "$got" "dry"
expect_grep "$WORK/c12.out" "^# MEMTRACE_COLLECTOR: none given; memtrace run would start a local collector"
echo "ok: a dry run's lines run in a shell as given"

# 7f. Started with SIGINT ignored (a shell's background job in a script): passed on, the job
# ignores it too, and the line says so rather than suggesting the job was interrupted.
sh -c 'trap "" INT; exec "$0" run --collector "$1" --timeout 200ms --no_agent -- sleep 3' \
  "$MEMTRACE" "$CLOSED" >"$WORK/c7f.out" 2>"$WORK/c7f.err" &
runpid=$!
sleep 1.5
kill -INT "$runpid"
wait "$runpid"
expect_eq "exit code of a job that ignores SIGINT" "$?" "0"
expect_grep "$WORK/c7f.err" "passed signal 2 (Interrupt) from pid [0-9]* on to the job (which ignores it"
echo "ok: SIGINT passed to a job that ignores it is said to be ignored"

# 8. Usage errors.
"$MEMTRACE" run --job x >"$WORK/c8.out" 2>"$WORK/c8.err"
expect_eq "exit code without a command" "$?" "2"
expect_grep "$WORK/c8.err" "no command to run"
# --data with a collector given does nothing: said.
MEMTRACE_COLLECTOR="$CLOSED" "$MEMTRACE" run --data "$WORK/d8" --timeout 200ms --no_agent -- true \
  >"$WORK/c8c.out" 2>"$WORK/c8c.err"
expect_eq "exit code with --data and a collector" "$?" "0"
expect_grep "$WORK/c8c.err" "WARNING: --data applies to a local collector, and this run records to $CLOSED (\$MEMTRACE_COLLECTOR): ignored"
# A MEMTRACE_ATTEMPT every worker's agent would refuse: said before the job, not "did the job
# use the GPU?" after it.
MEMTRACE_ATTEMPT=abc "$MEMTRACE" run --data "$WORK/d8" -- true >"$WORK/c8b.out" 2>"$WORK/c8b.err"
expect_eq "exit code for MEMTRACE_ATTEMPT=abc" "$?" "2"
expect_grep "$WORK/c8b.err" "memtrace run: MEMTRACE_ATTEMPT='abc' is not an integer: every worker's agent would refuse its identity"

# 12. A memtrace run killed with SIGKILL cannot remove its temporary directory (the collector's
# port file and log); the next run removes it, as its lock is nobody's now. A live run's stays.
TMPDIR="$WORK/tmp12" && mkdir -p "$TMPDIR" && export TMPDIR
"$MEMTRACE" run --data "$WORK/d12" --no_agent -- sleep 31.7 >"$WORK/c12.out" 2>"$WORK/c12.err" &
killed=$!
wait_for_line "$WORK/c12.err" "local collector" 10
left=$(ls -d "$TMPDIR"/memtrace-run-*)
[ -n "$left" ] || fail "no temporary directory while the run runs"
kill -9 "$killed"
wait "$killed" 2>/dev/null
pkill -f "sleep 31.7" 2>/dev/null
[ -d "$left" ] || fail "$left went with SIGKILL: nothing to sweep"
"$MEMTRACE" run --data "$WORK/d12b" --no_agent -- true >"$WORK/c12b.out" 2>"$WORK/c12b.err"
expect_eq "exit code of the run after" "$?" "0"
[ -d "$left" ] && fail "the killed run's $left is still there: $(ls -la "$left")"
expect_eq "temporary directories left" "$(ls -d "$TMPDIR"/memtrace-run-* 2>/dev/null | wc -l)" "0"
echo "ok: a SIGKILLed run's temporary directory is removed by the next run"
echo PASS
