#!/usr/bin/env bash
# Builds the libFuzzer targets (bazel --config=fuzz: clang, -fsanitize=fuzzer,address,undefined) and runs
# each for a bounded time. Exits non-zero when a target crashes, leaks, times out on an input or
# fails to build; the crashing input is kept and its path printed.
#
#   tools/fuzz.sh [TOTAL_SECONDS]     default 60 (or $FUZZ_SECONDS), split evenly over targets
#   FUZZ_WORKDIR=DIR                  keep corpora and artifacts there (default: a temp dir)
#   FUZZ_TARGETS="//a:b //c:d"        run only these
#
# Prints one line per target: "<target>: <N> execs in <S> s (<R>/s), corpus <C> inputs: OK|CRASH".
set -uo pipefail
cd "$(dirname "$0")/.."

total=${1:-${FUZZ_SECONDS:-60}}
if ! [[ "$total" =~ ^[0-9]+$ ]] || [ "$total" -lt 1 ]; then
  echo "fuzz.sh: TOTAL_SECONDS must be a positive integer, got '$total'" >&2
  exit 2
fi
read -r -a targets <<<"${FUZZ_TARGETS:-//proto/codec/fuzz:batch_codec_fuzzer //collector/store:key_codec_fuzzer //query/importers/fuzz:kineto_fuzzer}"
per=$((total / ${#targets[@]}))
[ "$per" -ge 1 ] || per=1

if ! command -v clang >/dev/null || ! ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
  echo "fuzz.sh: needs clang and libclang-rt-14-dev (libFuzzer); run tools/setup.sh" >&2
  exit 2
fi

work=${FUZZ_WORKDIR:-$(mktemp -d -t memtrace-fuzz.XXXXXX)}
mkdir -p "$work"
log="$work/bazel.log"

# Seeds for the batch decoder: valid batches from the real encoder (normal build config).
if ! bazel build //proto/codec/fuzz:batch_corpus_seeds >"$log" 2>&1; then
  grep -v linux-sandbox "$log" | tail -20
  echo "fuzz.sh: building the seed writer failed" >&2
  exit 1
fi
seeds_bin="$(bazel info bazel-bin 2>/dev/null)/proto/codec/fuzz/batch_corpus_seeds"

if ! bazel build --config=fuzz "${targets[@]}" >"$log" 2>&1; then
  grep -v linux-sandbox "$log" | tail -30
  echo "fuzz.sh: building the fuzz targets failed" >&2
  exit 1
fi
bin_dir=$(bazel info --config=fuzz bazel-bin 2>/dev/null)

failed=0
for t in "${targets[@]}"; do
  pkg=${t#//}
  pkg=${pkg%%:*}
  name=${t##*:}
  corpus="$work/$name/corpus"
  mkdir -p "$corpus" "$work/$name/artifacts"
  extra=()
  if [ "$name" = batch_codec_fuzzer ]; then "$seeds_bin" "$corpus" || true; fi
  if [ "$name" = kineto_fuzzer ]; then
    cp query/importers/fuzz/seeds/*.json "$corpus"/
    extra=(-dict=query/importers/fuzz/kineto.dict)
  fi
  out="$work/$name/run.log"
  # -rss_limit_mb / -timeout turn runaway memory or a hang on one input into a finding too.
  "$bin_dir/$pkg/$name" "${extra[@]}" -max_total_time="$per" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$work/$name/artifacts/" "$corpus" >"$out" 2>&1
  rc=$?
  execs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$out" | grep -oE '[0-9]+$' | tail -1)
  secs=$(grep -oE 'stat::average_exec_per_sec: *[0-9]+' "$out" | grep -oE '[0-9]+$' | tail -1)
  inputs=$(find "$corpus" -type f | wc -l)
  if [ "$rc" -eq 0 ]; then
    echo "$t: ${execs:-?} execs in ${per} s (${secs:-?}/s), corpus $inputs inputs: OK"
  else
    failed=1
    echo "$t: ${execs:-?} execs in ${per} s, corpus $inputs inputs: CRASH (exit $rc)"
    grep -E 'ERROR|SUMMARY|violated|Test unit written' "$out" | head -10
    echo "  log: $out"
  fi
done
exit "$failed"
