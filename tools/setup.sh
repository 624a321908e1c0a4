#!/usr/bin/env bash
# Installs what memtrace needs to build and test on Debian 12 (run as root; a no-op when all is
# there). Everything comes from Debian's packages; Bazel then builds offline.
set -euo pipefail

PACKAGES=(
  bazel-bootstrap g++ pkg-config git
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  librocksdb-dev liblz4-dev rocksdb-tools libabsl-dev libgtest-dev libgmock-dev libbenchmark-dev
  libsimdjson-dev rapidjson-dev zlib1g-dev
  clang libclang-rt-14-dev patchelf
  python3 python3-torch chromium openssl
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "memtrace setup: installing ${missing[*]}" >&2
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
