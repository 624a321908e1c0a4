#!/bin/sh
# Runs python_helpers_test.py with every python3 found (Debian's, which has the CPU-only
# python3-torch, and the first on PATH), so the helpers are checked with and without torch.
#   args: PYTHON_DIR TEST_PY
set -u
ran=0
for py in /usr/bin/python3 $(command -v python3); do
  [ -x "$py" ] || continue
  echo "== $py"
  PYTHONPATH="$1" "$py" "$2" || exit 1
  ran=$((ran + 1))
done
[ "$ran" -gt 0 ] || { echo "FAIL: no python3"; exit 1; }
echo PASS
