#!/bin/sh
# tools/python/memtrace/_agent_env.py must be what //tools/launch:agent_env_py prints now, so the
# Python runtime_env uses the agent's current variable list.
#   args: AGENT_ENV_PY CHECKED_IN
"$1" >"$TEST_TMPDIR/now.py" || exit 1
if ! diff -u "$2" "$TEST_TMPDIR/now.py"; then
  echo "FAIL: $2 is stale; regenerate it with:"
  echo "  bazel run //tools/launch:agent_env_py > tools/python/memtrace/_agent_env.py"
  exit 1
fi
echo PASS
