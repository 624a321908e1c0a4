#!/bin/sh
# A stand-in for torchrun: starts NPROC copies of a worker with torchrun's environment and
# returns the first non-zero exit code of a worker (0 when all succeed).
#
#   fake_torchrun.sh NPROC WORKER [ARGS...]
#
# FAKE_NODE_RANK / FAKE_NNODES make it one node of several (GROUP_RANK, global RANK);
# FAKE_RUN_ID sets TORCHELASTIC_RUN_ID; FAKE_RESTART sets TORCHELASTIC_RESTART_COUNT.
set -u
nproc=$1
shift
node=${FAKE_NODE_RANK:-0}
nnodes=${FAKE_NNODES:-1}
world=$((nproc * nnodes))
pids=""
i=0
while [ "$i" -lt "$nproc" ]; do
  (
    export RANK=$((node * nproc + i)) LOCAL_RANK=$i WORLD_SIZE=$world LOCAL_WORLD_SIZE=$nproc
    export GROUP_RANK=$node TORCHELASTIC_RESTART_COUNT=${FAKE_RESTART:-0}
    export MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 TORCHELASTIC_MAX_RESTARTS=0
    if [ -n "${FAKE_RUN_ID:-}" ]; then export TORCHELASTIC_RUN_ID=$FAKE_RUN_ID; fi
    exec "$@"
  ) &
  pids="$pids $!"
  i=$((i + 1))
done
code=0
for pid in $pids; do
  wait "$pid"
  rc=$?
  if [ "$code" -eq 0 ] && [ "$rc" -ne 0 ]; then code=$rc; fi
done
exit "$code"
