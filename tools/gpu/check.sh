#!/usr/bin/env bash
# The GPU check of the CUPTI agent (issue 11), one command, prepared to run in one device lease.
#
#   tools/gpu/check.sh [--bundle DIR] [--out DIR] [--steps N] [--leak-mb MB]
#                      [--scenarios LIST] [--python PY] [--timeout S] [--rehearse]
#
#   --bundle     the folder tools/gpu/bundle.sh made (default dist/gpu)
#   --out        where results go (default $OUT, else dist/gpu-out)
#   --scenarios  comma list, default probe,default,async,expandable,ranks4
#   --rehearse   no GPU needed: env probe without CUDA, collector from the bundle, the agent
#                loaded by a CUDA-less Python (host samples must reach the collector), the CLI
#                and compare.py's own tests. The CUDA scenarios are skipped and say so.
#
# Every step prints its result as it goes (also into OUT/check.log); the end writes
# OUT/summary.json and OUT/summary.txt. A failing step does not stop the later ones.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUNDLE=$ROOT/dist/gpu
OUTDIR=${OUT:-$ROOT/dist/gpu-out}
STEPS=50
LEAK_MB=8
SCENARIOS=probe,default,async,expandable,ranks4
PY=${PYTHON:-python3}
TIMEOUT=180
REHEARSE=0

usage() { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; }
while (($#)); do
  case "$1" in
    --bundle) BUNDLE=$(cd "$2" && pwd) || exit 2; shift 2 ;;
    --out) OUTDIR=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --leak-mb) LEAK_MB=$2; shift 2 ;;
    --scenarios) SCENARIOS=$2; shift 2 ;;
    --python) PY=$2; shift 2 ;;
    --timeout) TIMEOUT=$2; shift 2 ;;
    --rehearse) REHEARSE=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "check.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[[ "$STEPS" =~ ^[0-9]+$ && "$STEPS" -ge 5 ]] || { echo "check.sh: --steps must be an integer >= 5" >&2; exit 2; }
[[ "$TIMEOUT" =~ ^[0-9]+$ ]] || { echo "check.sh: --timeout must be seconds" >&2; exit 2; }
mkdir -p "$OUTDIR" || exit 2
OUTDIR=$(cd "$OUTDIR" && pwd)
exec > >(tee -a "$OUTDIR/check.log") 2>&1

say() { printf '[check %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
has() { [[ ",$SCENARIOS," == *",$1,"* ]]; }
AGENT=$BUNDLE/libmemtrace_agent.so
COLLECTOR_BIN=$BUNDLE/memtrace-collector
CLI=$BUNDLE/memtrace
for f in "$AGENT" "$COLLECTOR_BIN" "$CLI"; do
  [ -e "$f" ] || { say "MISSING $f: run tools/gpu/bundle.sh first"; exit 2; }
done
say "bundle $BUNDLE, out $OUTDIR, steps $STEPS, leak ${LEAK_MB} MiB/step, scenarios $SCENARIOS, rehearse $REHEARSE"
RESULTS=()  # "name status detail"
note() {
  local detail
  detail=$(printf '%s' "${3:-}" | tr '\n|' '  ' | tr -s ' ')
  RESULTS+=("$1|$2|$detail")
  say "RESULT $1: $2 $detail"
}

# ---- 0. Environment ----
{
  echo "== uname"; uname -a
  echo "== nvidia-smi"; nvidia-smi 2>&1 || true
  nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv 2>&1 || true
  echo "== nvcc"; nvcc --version 2>&1 || true
  echo "== python"; "$PY" --version 2>&1
  echo "== torch"; "$PY" -c 'import torch; print(torch.__version__, torch.version.cuda, torch.cuda.is_available())' 2>&1
  echo "== ldd agent"; ldd "$AGENT" 2>&1
  echo "== agent exports"; nm -D --defined-only "$AGENT" 2>&1
} >"$OUTDIR/env.txt" 2>&1
say "environment written to $OUTDIR/env.txt"
grep -A3 -E '^== (torch|nvcc)' "$OUTDIR/env.txt" | head -8
CUDA_OK=0
if [ "$REHEARSE" -eq 0 ] && "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  CUDA_OK=1
fi
say "CUDA usable by $PY: $CUDA_OK"

# ---- Collector from the bundle ----
DATA=$OUTDIR/data
rm -rf "$DATA" "$OUTDIR/collector.port"
"$COLLECTOR_BIN" --listen 127.0.0.1:0 --data "$DATA" --durability async \
  --port_file "$OUTDIR/collector.port" >"$OUTDIR/collector.log" 2>&1 &
COLLECTOR_PID=$!
trap 'kill $COLLECTOR_PID 2>/dev/null; wait $COLLECTOR_PID 2>/dev/null' EXIT
for _ in $(seq 100); do [ -s "$OUTDIR/collector.port" ] && break; sleep 0.1; done
if [ ! -s "$OUTDIR/collector.port" ]; then
  note collector FAIL "did not start: $(tail -3 "$OUTDIR/collector.log")"
  exit 1
fi
export MEMTRACE_COLLECTOR=127.0.0.1:$(cat "$OUTDIR/collector.port")
note collector OK "listening on $MEMTRACE_COLLECTOR"
"$CLI" help >"$OUTDIR/cli_help.txt" 2>&1 || "$CLI" --help >"$OUTDIR/cli_help.txt" 2>&1 || true
cli_has() { grep -qE "^ *$1( |$)" "$OUTDIR/cli_help.txt"; }

# Environment of a run under the agent. NVTX goes to the libcupti the process uses (cupti.md
# section 4, option a); NVTX_MODE=agent points it at the agent's forwarder instead (option b).
agent_env() {
  local job=$1
  echo CUDA_INJECTION64_PATH="$AGENT"
  if [ "${NVTX_MODE:-cupti}" = agent ]; then echo NVTX_INJECTION64_PATH="$AGENT"
  elif [ -n "${NVTX_LIB:-}" ]; then echo NVTX_INJECTION64_PATH="$NVTX_LIB"; fi
  echo MEMTRACE_JOB_ID="$job"
  echo MEMTRACE_SHUTDOWN_TIMEOUT_MS=15000
}

# ---- Rehearsal: the agent in a Python without CUDA ----
if [ "$REHEARSE" -eq 1 ]; then
  "$PY" "$ROOT/tools/gpu/compare_test.py" >"$OUTDIR/compare_test.txt" 2>&1 \
    && note compare_test OK "$(tail -1 "$OUTDIR/compare_test.txt")" \
    || note compare_test FAIL "$(tail -3 "$OUTDIR/compare_test.txt" | tr '\n' ' ')"
  "$PY" "$ROOT/tools/gpu/probe.py" --no-cuda >"$OUTDIR/probe_nocuda.json" 2>&1 \
    && note probe_nocuda OK "$(head -c 300 "$OUTDIR/probe_nocuda.json")" \
    || note probe_nocuda FAIL "$(tail -2 "$OUTDIR/probe_nocuda.json")"
  env MEMTRACE_JOB_ID=rehearse RANK=0 WORLD_SIZE=1 MEMTRACE_SAMPLE_MS=20 \
    MEMTRACE_SHUTDOWN_TIMEOUT_MS=5000 timeout 60 "$PY" -c "
import ctypes, sys, time
lib = ctypes.CDLL(sys.argv[1])
print('InitializeInjection ->', lib.InitializeInjection(), lib.InitializeInjection())
time.sleep(0.5)
" "$AGENT" >"$OUTDIR/rehearse_agent.txt" 2>&1
  rc=$?
  if [ $rc -eq 0 ] && grep -q "InitializeInjection -> 1 1" "$OUTDIR/rehearse_agent.txt"; then
    note agent_load OK "$(grep -c 'memtrace-agent:' "$OUTDIR/rehearse_agent.txt") agent log lines"
  else
    note agent_load FAIL "rc $rc: $(tail -3 "$OUTDIR/rehearse_agent.txt" | tr '\n' ' ')"
  fi
  "$CLI" ranks --job rehearse --format json >"$OUTDIR/rehearse_ranks.json" 2>&1 \
    && note cli_ranks OK "$(head -c 300 "$OUTDIR/rehearse_ranks.json")" \
    || note cli_ranks FAIL "$(head -c 300 "$OUTDIR/rehearse_ranks.json")"
  "$CLI" timeline --job rehearse --format json >"$OUTDIR/rehearse_timeline.json" 2>&1 \
    && note cli_timeline OK "$(head -c 200 "$OUTDIR/rehearse_timeline.json")" \
    || note cli_timeline FAIL "$(head -c 300 "$OUTDIR/rehearse_timeline.json")"
fi

# ---- 0b. Probe: is InitializeInjection called, do memory records arrive? ----
if has probe; then
  if [ "$CUDA_OK" -eq 1 ]; then
    "$PY" "$ROOT/tools/gpu/probe.py" >"$OUTDIR/probe_plain.json" 2>"$OUTDIR/probe_plain.stderr"
    NVTX_LIB=$("$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); l=d.get("cupti_after_init") or d.get("cupti_after_import") or []; print(l[0] if l else "")' "$OUTDIR/probe_plain.json" 2>/dev/null)
    [ -n "$NVTX_LIB" ] || NVTX_LIB=$BUNDLE/libcupti.so.13
    export NVTX_LIB
    note probe_plain OK "libcupti used by torch: $NVTX_LIB"
    for mode in cupti agent; do
      job=gpu-probe-$mode-$$
      env $(NVTX_MODE=$mode agent_env "$job") timeout "$TIMEOUT" "$PY" "$ROOT/tools/gpu/probe.py" --oom \
        >"$OUTDIR/probe_$mode.json" 2>"$OUTDIR/probe_$mode.stderr"
      rc=$?
      "$CLI" timeline --job "$job" --format json >"$OUTDIR/probe_$mode.timeline.json" 2>&1
      lines=$(grep -c 'memtrace-agent:' "$OUTDIR/probe_$mode.stderr")
      summary=$(grep -h 'memtrace-agent: summary' "$OUTDIR/probe_$mode.stderr" | head -1)
      if [ $rc -eq 0 ] && [ "$lines" -gt 0 ]; then
        note "probe_nvtx_$mode" OK "rc 0, $lines agent lines; ${summary#*summary: }"
      else
        note "probe_nvtx_$mode" FAIL "rc $rc, $lines agent lines: $(tail -3 "$OUTDIR/probe_$mode.stderr" | tr '\n' ' ')"
      fi
    done
  else
    note probe SKIP "no CUDA here"
  fi
fi

# ---- 1-4. Scenarios: per-step bytes vs torch, leak, overhead ----
# run_scenario NAME ALLOC_CONF NPROC LEAK_RANK(-1 = all)
run_scenario() {
  local name=$1 conf=$2 nproc=$3 leak_rank=$4
  if [ "$CUDA_OK" -ne 1 ]; then note "$name" SKIP "no CUDA here"; return; fi
  local job=gpu-$name-$$ leak_arg=() launcher=("$PY")
  [ "$leak_rank" -ge 0 ] && leak_arg=(--leak-rank "$leak_rank")
  if [ "$nproc" -gt 1 ]; then
    # --redirects 2 --tee 2: the workers' stderr (agent lines) lands in our files and in the log dir
    # (Debian's torchrun also fails without non-zero stream settings, see launchers.md).
    launcher=(torchrun --standalone --nproc_per_node "$nproc" --redirects 2 --tee 2 --log_dir "$OUTDIR/$name.torchrun")
  fi
  say "$name: PYTORCH_CUDA_ALLOC_CONF='$conf', $nproc process(es), leak on rank ${leak_rank/-1/all}"
  local start=$SECONDS
  env PYTORCH_CUDA_ALLOC_CONF="$conf" timeout "$TIMEOUT" "${launcher[@]}" "$ROOT/tools/gpu/leak_train.py" \
    --steps "$STEPS" --leak-mb "$LEAK_MB" "${leak_arg[@]}" --out "$OUTDIR/$name.base.rank{rank}.jsonl" \
    >"$OUTDIR/$name.base.stdout" 2>"$OUTDIR/$name.base.stderr"
  local rc_base=$?
  env $(agent_env "$job") PYTORCH_CUDA_ALLOC_CONF="$conf" timeout "$TIMEOUT" "${launcher[@]}" \
    "$ROOT/tools/gpu/leak_train.py" --steps "$STEPS" --leak-mb "$LEAK_MB" "${leak_arg[@]}" \
    --out "$OUTDIR/$name.agent.rank{rank}.jsonl" >"$OUTDIR/$name.agent.stdout" 2>"$OUTDIR/$name.agent.stderr"
  local rc_agent=$?
  "$CLI" timeline --job "$job" --format json >"$OUTDIR/$name.timeline.json" 2>"$OUTDIR/$name.timeline.err"
  for cmd in diverged growth; do
    if cli_has "$cmd"; then "$CLI" "$cmd" --job "$job" >"$OUTDIR/$name.$cmd.txt" 2>&1; fi
  done
  "$PY" "$ROOT/tools/gpu/compare.py" --name "$name" --program "$OUTDIR/$name.agent.rank*.jsonl" \
    --baseline "$OUTDIR/$name.base.rank*.jsonl" --timeline "$OUTDIR/$name.timeline.json" \
    --agent-log "$OUTDIR/$name.agent.stderr" --leak-mb "$LEAK_MB" \
    $([ "$leak_rank" -ge 0 ] && echo --leak-rank "$leak_rank") >"$OUTDIR/$name.json" 2>"$OUTDIR/$name.compare.err"
  local detail
  detail=$("$PY" -c '
import json, sys
r = json.load(open(sys.argv[1]))
leak = r.get("leak", {})
print("rc base/agent %s/%s; follows %s, max rel err %s; leak growing ranks %s (found %s); overhead %s%%; %ss" % (
    sys.argv[2], sys.argv[3], r.get("best_measure"), "%.4f" % r["max_rel_err"] if "max_rel_err" in r else "n/a",
    leak.get("growing_ranks"), leak.get("found"),
    "%.1f" % r["overhead_pct"] if "overhead_pct" in r else "n/a", sys.argv[4]))
' "$OUTDIR/$name.json" "$rc_base" "$rc_agent" "$((SECONDS - start))" 2>&1)
  if [ $rc_base -eq 0 ] && [ $rc_agent -eq 0 ]; then note "$name" DONE "$detail"; else note "$name" FAIL "$detail"; fi
  for cmd in diverged growth; do
    [ -s "$OUTDIR/$name.$cmd.txt" ] && { say "$name: memtrace $cmd:"; head -12 "$OUTDIR/$name.$cmd.txt"; }
  done
}

has default && run_scenario default "" 1 -1
has async && run_scenario async "backend:cudaMallocAsync" 1 -1
has expandable && run_scenario expandable "expandable_segments:True" 1 -1
has ranks4 && run_scenario ranks4 "" 4 2

# ---- Summary ----
{
  printf '%s\n' "${RESULTS[@]}"
} >"$OUTDIR/results.txt"
"$PY" "$ROOT/tools/gpu/summarize.py" "$OUTDIR" >"$OUTDIR/summary.txt" 2>&1
cat "$OUTDIR/summary.txt"
fails=$(grep -c '|FAIL|' "$OUTDIR/results.txt")
say "done: $(wc -l <"$OUTDIR/results.txt") results, $fails failed; summary in $OUTDIR/summary.json"
[ "$fails" -eq 0 ]
