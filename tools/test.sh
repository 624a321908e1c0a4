#!/usr/bin/env bash
# The test command: installs what is missing, builds everything and runs every test offline.
# Prints one line per test target, then "N passed, N failed" last.
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
echo "$passed passed, $failed failed"
[ "$rc" -eq 0 ]
