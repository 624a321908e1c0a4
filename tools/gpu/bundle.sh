#!/usr/bin/env bash
# Builds the agent library, the collector and the CLI, and copies them with the shared
# libraries they need into one folder that runs on a machine without Debian's gRPC, RocksDB or
# Abseil (the GPU machine): rpath $ORIGIN on every file, debug info stripped, `ldd` checked.
#
#   tools/gpu/bundle.sh [DEST]      (default: dist/gpu, git-ignored through /dist/ in .gitignore)
#
# Left out: glibc and the loader, libstdc++ and libgcc_s (Debian 12's copies need GLIBC_2.36,
# newer than e.g. Ubuntu 22.04's 2.35, while everything else needs at most GLIBC_2.34 and
# GLIBCXX_3.4.30, which any GCC >= 12 libstdc++ has; inside a training process the loaded copy
# wins by SONAME anyway), and libcuda (the driver's own). Kept: libcupti.so.13 (a plain CUDA
# program has none; in a PyTorch process the wheel's already loaded libcupti.so.13 wins by
# SONAME, see ../shared/notes/cupti.md section 6).
# Prints the total size and the glibc / libstdc++ versions the bundle needs; fails above 60 MiB.
set -euo pipefail
cd "$(dirname "$0")/../.."
DEST=${1:-dist/gpu}
LIMIT=$((60 << 20))

targets=(//agent:libmemtrace_agent.so)
for t in //collector:memtrace-collector //query/cli:memtrace; do
  if bazel query "$t" >/dev/null 2>&1; then targets+=("$t"); else echo "bundle: $t does not exist yet, skipped" >&2; fi
done
echo "bundle: building ${targets[*]} (-c opt)" >&2
# Optimized, as it will run under the training job; --symlink_prefix=/ leaves the workspace's
# bazel-bin link (other builds' fastbuild outputs) alone.
if ! bazel build -c opt --symlink_prefix=/ "${targets[@]}" >/tmp/bundle-build.$$ 2>&1; then
  grep -v linux-sandbox /tmp/bundle-build.$$ | tail -30 >&2
  rm -f /tmp/bundle-build.$$
  exit 1
fi
rm -f /tmp/bundle-build.$$
BIN=$(bazel info -c opt bazel-bin 2>/dev/null)

rm -rf "$DEST"
mkdir -p "$DEST"
files=()
for t in "${targets[@]}"; do
  pkg=${t#//}; pkg=${pkg%%:*}; name=${t##*:}
  cp -L "$BIN/$pkg/$name" "$DEST/$name"
  chmod u+w "$DEST/$name"
  files+=("$DEST/$name")
done

# Everything ldd resolves, except the C library, the loader and the driver.
skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libpthread\.so|libdl\.so|librt\.so|libutil\.so|libresolv\.so|libcuda\.so|libstdc\+\+\.so|libgcc_s\.so)'
declare -A seen=()
for f in "${files[@]}"; do
  while read -r name _ path _; do
    [[ -z "$name" || "$name" =~ $skip || -n "${seen[$name]:-}" ]] && continue
    if [[ "$path" == "not" || ! -e "$path" ]]; then
      echo "bundle: $f needs $name, which is not found here" >&2
      exit 1
    fi
    seen[$name]=1
    cp -L "$path" "$DEST/$name"
    chmod u+w "$DEST/$name"
  done < <(ldd "$f" | awk '/=>/ {print $1, $2, $3, $4}')
done

for f in "$DEST"/*; do
  strip --strip-unneeded "$f" 2>/dev/null || strip --strip-debug "$f" 2>/dev/null || true
  patchelf --set-rpath '$ORIGIN' "$f"
done

# Every dependency must now resolve, from the bundle or from the system's glibc.
missing=0
for f in "$DEST"/*; do
  if env -u LD_LIBRARY_PATH ldd "$f" 2>&1 | grep -q "not found"; then
    echo "bundle: $f has unresolved libraries:" >&2
    env -u LD_LIBRARY_PATH ldd "$f" | grep "not found" >&2
    missing=1
  fi
done
[ "$missing" -eq 0 ] || exit 1
# The libraries that are not glibc must come from the bundle itself.
for f in "$DEST"/*; do
  env -u LD_LIBRARY_PATH ldd "$f" | awk '/=>/ {print $1, $3}' | while read -r name path; do
    [[ "$name" =~ $skip ]] && continue
    case "$path" in
      "$(cd "$DEST" && pwd)"/*) ;;
      *) echo "bundle: $f resolves $name to $path, not to the bundle" >&2; exit 1 ;;
    esac
  done
done

glibc=$(for f in "$DEST"/*; do objdump -T "$f" 2>/dev/null | grep -o 'GLIBC_[0-9.]*'; done | sort -Vu | tail -1)
glibcxx=$(for f in "$DEST"/*; do objdump -T "$f" 2>/dev/null | grep -o 'GLIBCXX_[0-9.]*'; done | sort -Vu | tail -1)
echo "bundle: needs the target's $glibc and $glibcxx (libstdc++ of GCC >= 12)"
total=$(du -cb "$DEST"/* | tail -1 | cut -f1)
count=$(ls "$DEST" | wc -l)
printf 'bundle: %s: %d files, %d bytes (%.1f MiB)\n' "$DEST" "$count" "$total" "$(echo "$total / 1048576" | bc -l)"
if [ "$total" -ge "$LIMIT" ]; then
  echo "bundle: larger than 60 MiB" >&2
  exit 1
fi
