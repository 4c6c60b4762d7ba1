#!/usr/bin/env bash
# Install what the build and tests need (Debian 12), configure and build.
#   scripts/build.sh [build-dir] [extra cmake arguments...]
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}
shift || true

packages="cmake make gcc g++ clang python3 binutils pkg-config protobuf-compiler
  ocl-icd-libopencl1 ocl-icd-opencl-dev opencl-headers pocl-opencl-icd clinfo libdw-dev
  libunwind-dev libcapstone-dev openmpi-bin libopenmpi-dev
  uftrace clpeak python3-pyopencl libze1 libze-dev"
packages="$packages zlib1g-dev golang-go" # report --format pprof, read back by go tool pprof
missing=""
for p in $packages; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "xptrace: installing$missing" >&2
  sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  # shellcheck disable=SC2086
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi

cmake -S . -B "$dir" "$@" >/dev/null
cmake --build "$dir" -j"$(nproc)"
