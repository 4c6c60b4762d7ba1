#!/bin/sh
# `xptrace run --level-zero` on ze_threads (T threads, a queue each, R
# rounds of 3 chained commands): output unchanged, T*R*3 device slices on T
# queue tracks, nothing dropped.  The threads share the nodes (same call
# sites), so an edge may join another thread's visit: flow order is not
# checked, as for the OpenCL threads test.
#   run_threads.sh XPTRACE ZE_THREADS PERFETTO_DIR THREADS ROUNDS
set -u
xptrace=$1 program=$2 ptdir=$3 threads=$4 rounds=$5
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
"$program" "$threads" "$rounds" >"$out/plain" 2>&1 || fail "plain run: $(cat "$out/plain")"
"$xptrace" run --level-zero -c perfetto -o "$out/o" -- "$program" "$threads" "$rounds" \
  >"$out/stdout" 2>"$out/stderr"
rc=$?
[ $rc -eq 0 ] || { cat "$out/stderr"; fail "xptrace run exited $rc"; }
cmp -s "$out/plain" "$out/stdout" || fail "output changed: $(cat "$out/stdout")"
command -v protoc >/dev/null 2>&1 || { echo "no protoc: trace not checked"; exit 77; }
python3 "$ptdir/check_trace.py" proto "$ptdir/perfetto_min.proto" "$out/o/trace.perfetto-trace" \
  --device-min-dur 1 --device-slices $((threads * rounds * 3)) --device-lanes "$threads" \
  "--lanes=Level Zero queue=$threads" --any-flow-order --threads $((threads + 1)) \
  >"$out/check" 2>&1 || { cat "$out/check"; fail "check_trace"; }
cat "$out/check"
grep -q ' dropped=0 ' "$out/check" || fail "events dropped"
exit 0
