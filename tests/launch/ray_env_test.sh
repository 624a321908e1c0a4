#!/bin/sh
# `memtrace ray-env` prints valid runtime_env JSON carrying every variable of the agent's own
# list that a job-wide setting can be (and none of the per-worker ones), and
# memtrace.ray.runtime_env() builds the same dict.
# Then three "Ray workers" (the agent's Transport) started with exactly that runtime_env plus
# what Ray and verl set: one job named by RAY_JOB_ID, two ranks from RANK/WORLD_SIZE/LOCAL_RANK
# and one worker without them, which the collector names by host + device + pid.
#   args: MEMTRACE AGENT_ENV_PY PYTHON_DIR COLLECTOR_BIN WORKER COLLECTOR_VIEW
set -u
MEMTRACE=$1 AGENT_ENV_PY=$2 PYTHON_DIR=$3 COLLECTOR_BIN=$4 WORKER=$5 VIEW=$6
. "$(dirname "$0")/testlib.sh"
PYTHON=$(command -v python3) || fail "no python3"

# The agent's list, straight from the agent's code (not the checked-in copy).
"$AGENT_ENV_PY" >"$WORK/agent_env_now.py" || fail "agent_env_py"

# Every variable of the list set in the environment, each to a distinct value.
"$PYTHON" - "$WORK/agent_env_now.py" >"$WORK/all.env" <<'PY' || fail "reading the agent list"
import sys
ns = {}
exec(open(sys.argv[1]).read(), ns)
for name, _, _ in ns["AGENT_VARIABLES"]:
    print("%s=value-of-%s" % (name, name))
PY
set -a
. "$WORK/all.env"
set +a

"$MEMTRACE" ray-env --collector 10.1.2.3:7431 --job rl-1 --env PYTORCH_CUDA_ALLOC_CONF=x:y \
  >"$WORK/ray.json" 2>"$WORK/ray.err"
expect_eq "exit code" "$?" "0"

MEMTRACE_AGENT_LIB="$MEMTRACE_AGENT_LIB" PYTHONPATH="$PYTHON_DIR" "$PYTHON" - \
  "$WORK/agent_env_now.py" "$WORK/ray.json" "$MEMTRACE_AGENT_LIB" <<'PY' || fail "checks above"
import json, os, sys
ns = {}
exec(open(sys.argv[1]).read(), ns)
text = open(sys.argv[2]).read()
assert text.count("\n") == 1, "one line: %r" % text
env = json.loads(text)  # valid JSON
assert list(env) == ["env_vars"], env
got = env["env_vars"]
agent = os.path.realpath(sys.argv[3])
assert got["CUDA_INJECTION64_PATH"] == agent, got
assert got["NVTX_INJECTION64_PATH"] == agent, got
assert got["MEMTRACE_COLLECTOR"] == "10.1.2.3:7431", got
assert got["MEMTRACE_JOB_ID"] == "rl-1", got
assert got["PYTORCH_CUDA_ALLOC_CONF"] == "x:y", got
# MEMTRACE_RUN_ID is a `memtrace run`'s own, not the Ray job's.
per_process = {"MEMTRACE_DEVICE", "MEMTRACE_ATTEMPT", "MEMTRACE_RUN_ID"}
for name, set_by, _ in ns["AGENT_VARIABLES"]:
    if set_by == "memtrace" and name not in per_process and name not in (
            "MEMTRACE_COLLECTOR", "MEMTRACE_JOB_ID", ns["DEFAULT_JOB_ID_VAR"]):
        assert got.get(name) == "value-of-" + name, "missing agent setting %s: %s" % (name, got)
    elif name not in ("MEMTRACE_COLLECTOR", "MEMTRACE_JOB_ID"):
        # RANK, RAY_JOB_ID, ... differ per worker; the launcher sets them, never the runtime_env.
        assert name not in got, "per-worker variable %s in the runtime_env" % name
known = {v[0] for v in ns["AGENT_VARIABLES"]} | {
    "CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH", "PYTORCH_CUDA_ALLOC_CONF"}
assert set(got) <= known, set(got) - known

# The pure-Python builder agrees, key for key and in order.
import memtrace.ray
py = memtrace.ray.runtime_env("10.1.2.3:7431", job="rl-1",
                              extra={"PYTORCH_CUDA_ALLOC_CONF": "x:y"})
assert py == env, "python %s\n     cli %s" % (py, env)
assert list(py["env_vars"]) == list(got), (list(py["env_vars"]), list(got))
print("ok: %d variables, python and cli agree" % len(got))
PY

# Without --job the workers keep their RAY_JOB_ID; the two builders still agree.
"$MEMTRACE" ray-env --collector head:7431 >"$WORK/ray2.json" 2>"$WORK/ray2.err" || fail "ray-env"
PYTHONPATH="$PYTHON_DIR" "$PYTHON" - "$WORK/ray2.json" <<'PY' || fail "no-job checks"
import json, sys
import memtrace.ray
env = json.load(open(sys.argv[1]))
assert "MEMTRACE_JOB_ID" not in env["env_vars"], env
assert memtrace.ray.runtime_env("head:7431") == env, (memtrace.ray.runtime_env("head:7431"), env)
PY

# A token in the shell goes into the runtime_env (the agents need it), with a warning: Ray keeps
# and shows a job's runtime_env.
MEMTRACE_TOKEN=secret "$MEMTRACE" ray-env --collector head:7431 >"$WORK/ray3.json" \
  2>"$WORK/ray3.err" || fail "ray-env with a token"
grep -q '"MEMTRACE_TOKEN": "secret"' "$WORK/ray3.json" || fail "token not forwarded: $(cat "$WORK/ray3.json")"
expect_grep "$WORK/ray3.err" "MEMTRACE_TOKEN goes into the job's runtime_env.*MEMTRACE_TOKEN_FILE"

# Ray workers: the runtime_env's variables (and nothing else of this shell's memtrace settings).
for v in $(sed 's/=.*//' "$WORK/all.env"); do unset "$v"; done
start_collector "$WORK/data"
"$MEMTRACE" ray-env --collector "$COLLECTOR_ADDR" >"$WORK/ray4.json" 2>"$WORK/ray4.err" ||
  fail "ray-env"
"$PYTHON" -c 'import json, shlex, sys
for k, v in json.load(open(sys.argv[1]))["env_vars"].items():
    print("export %s=%s" % (k, shlex.quote(v)))' "$WORK/ray4.json" >"$WORK/ray4.sh"
(
  . "$WORK/ray4.sh"
  export RAY_JOB_ID=05000000
  RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 "$WORKER" &
  RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 "$WORKER" &
  CUDA_VISIBLE_DEVICES=3 "$WORKER" &
  wait
) >"$WORK/ray-workers.out" 2>"$WORK/ray-workers.err"
"$VIEW" "$COLLECTOR_ADDR" jobs >"$WORK/jobs" 2>"$WORK/view.err" || fail "collector_view jobs"
expect_eq "jobs" "$(cat "$WORK/jobs")" "job=05000000 ranks=3 events=120"
"$VIEW" "$COLLECTOR_ADDR" ranks 05000000 >"$WORK/ranks" 2>"$WORK/view.err" || fail "ranks"
expect_eq "ranks identified from the env" "$(grep -c 'identified_by=env' "$WORK/ranks")" "2"
expect_eq "ranks named by host+device+pid" \
  "$(grep -c 'identified_by=host+device+pid' "$WORK/ranks")" "1"
expect_eq "launcher" "$(grep -c 'launcher=ray' "$WORK/ranks")" "3"
stop_collector
echo "ok: Ray workers with the runtime_env: job RAY_JOB_ID, 2 env ranks + 1 host+device+pid"

# Bad input: no collector is a usage error.
env -u MEMTRACE_COLLECTOR "$MEMTRACE" ray-env >"$WORK/ray3.out" 2>"$WORK/ray3.err"
expect_eq "exit code without --collector" "$?" "2"
expect_grep "$WORK/ray3.err" "--collector ADDR is required"
echo PASS
