#!/usr/bin/env bash
# The test command: installs what is missing, builds everything and runs every test offline,
# then runs the libFuzzer targets for a bounded time (tools/fuzz.sh; MEMTRACE_FUZZ_SECONDS,
# default 120, split over the targets; 0 skips). Prints one line per test target, then
# "N passed, N failed" last (the fuzz run counts as one test).
set -uo pipefail
cd "$(dirname "$0")/.."
./tools/setup.sh || { echo "setup failed"; echo "0 passed, 1 failed"; exit 1; }

log=$(mktemp)
bazel test //... --test_output=errors --jobs=2 --local_test_jobs=2 "$@" >"$log" 2>&1
rc=$?
grep -v 'linux-sandbox' "$log" | grep -E '^(//|ERROR|FAILED|Executed)' || true
passed=$(grep -cE '^//\S+\s+(\(cached\) )?PASSED' "$log")
failed=$(grep -cE '^//\S+\s+(FAILED|TIMEOUT|NO STATUS|FAILED TO BUILD|INCOMPLETE)' "$log")
if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
  # A build error fails before any test runs: show it and count it.
  grep -v 'linux-sandbox' "$log" | grep -E -A5 '^ERROR' | head -40
  failed=1
fi
rm -f "$log"

fuzz_seconds=${MEMTRACE_FUZZ_SECONDS:-120}
if [ "$fuzz_seconds" -gt 0 ]; then
  if ./tools/fuzz.sh "$fuzz_seconds"; then
    passed=$((passed + 1))
  else
    echo "FAILED: tools/fuzz.sh $fuzz_seconds"
    failed=$((failed + 1))
    rc=1
  fi
fi
echo "$passed passed, $failed failed"
[ "$rc" -eq 0 ]
