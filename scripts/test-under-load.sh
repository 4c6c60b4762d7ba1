#!/usr/bin/env bash
# Runs the test suite under a fixed background load, so that a failure
# that shows only on a busy machine can be reproduced anywhere:
#   scripts/test-under-load.sh [build-dir] [ctest arguments...]
# Two busy processes per core (started here, stopped on any exit), then
# `ctest --test-dir build-dir --output-on-failure -j2` with the arguments
# given (e.g. -L quick, -R causal).  Exit status: ctest's.
set -uo pipefail
dir=${1:-build}
shift || true
[ -f "$dir/CTestTestfile.cmake" ] || { echo "test-under-load: no tests in '$dir' (build first)" >&2; exit 2; }
cores=$(nproc)
pids=()
stop() { kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null; }
trap stop EXIT
trap 'exit 130' INT TERM
for _ in $(seq $((2 * cores))); do
  # a shell loop: pure CPU, no I/O, killed with the script
  sh -c 'while :; do :; done' &
  pids+=($!)
done
echo "test-under-load: ${#pids[@]} busy processes on $cores cores"
start=$(date +%s)
ctest --test-dir "$dir" --output-on-failure -j2 "$@"
rc=$?
echo "test-under-load: $(( $(date +%s) - start )) s under load, ctest exit $rc"
exit $rc
