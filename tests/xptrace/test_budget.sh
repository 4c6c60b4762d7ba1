#!/bin/sh
# test_budget.sh XPTRACE PROGRAM PAIRS: honest budgets (issue 24).
# - absurd --buffer-size values are refused with one line, exit 2;
# - --max-size stops a recording at that size: the rest is counted as
#   dropped, said with its reason, and the trace holds whole slices only;
# - on a 128 MiB file system (a tmpfs of its own; needs root and mount,
#   else exit 77) a 1G budget is bounded by the free space with one line,
#   the run's trace is whole, and the file system gets its room back.
set -u
xptrace=$1 prog=$2 pairs=$3
fail() { echo "FAIL: $*"; exit 1; }
for size in 17179869183G 2T 99999999999999999999; do
  "$xptrace" run --buffer-size "$size" -- true >/dev/null 2>err
  rc=$?
  [ $rc -eq 2 ] || fail "--buffer-size $size: exit $rc, expected 2"
  [ "$(grep -c '^xptrace: ' err)" -eq 1 ] || fail "--buffer-size $size: $(cat err)"
done
XPTRACE_BUFFER_SIZE=5T "$xptrace" run -c perfetto -o bigenv -- "$prog" >/dev/null 2>err ||
  fail "XPTRACE_BUFFER_SIZE=5T: exit $?"
grep -q "xpti: XPTRACE_BUFFER_SIZE='5T' is above the maximum" err || fail "no message: $(cat err)"
rm -rf bigenv err
for size in 0 12Q; do
  "$xptrace" run --max-size "$size" -- true >/dev/null 2>err && fail "--max-size $size accepted"
  [ "$(grep -c '^xptrace: ' err)" -eq 1 ] || fail "--max-size $size: $(cat err)"
done
# stats_pairs records 80,000 events (~1.3 MB): at most 512K of them kept.
"$xptrace" run -c perfetto --buffer-size 256K --max-size 512K -o capped -- "$pairs" paced >/dev/null 2>err ||
  fail "--max-size run: exit $?"
grep -Eq "dropped [1-9][0-9]* events.*\(the recording reached its maximum size\)" err ||
  fail "--max-size: no drop line: $(cat err)"
"$xptrace" report capped >report.txt || fail "report of the capped run"
grep -q "ends without a begin 0, begins never ended 0" report.txt || fail "half slices: $(cat report.txt)"
size=$(stat -c %s capped/trace.perfetto-trace)
[ "$size" -lt $((1024 * 1024)) ] || fail "capped trace of $size bytes"
rm -rf capped err report.txt

[ "$(id -u)" = 0 ] || { echo "SKIP: the small file system needs root"; exit 77; }
fs=$(mktemp -d)
trap 'umount "$fs" 2>/dev/null; rmdir "$fs"' EXIT
mount -t tmpfs -o size=128m xptrace-budget "$fs" 2>/dev/null || { echo "SKIP: cannot mount a tmpfs"; exit 77; }
XPTRACE_BUFFER_SIZE=1G "$xptrace" run -c perfetto,stats -o "$fs/out" -- "$prog" >"$fs/stdout" 2>"$fs/stderr" ||
  fail "run on 128M: exit $?: $(cat "$fs/stderr")"
grep -q "xpti: perfetto collector: a buffer of 1G is more than half the free space" "$fs/stderr" ||
  fail "no message about the bounded budget: $(cat "$fs/stderr")"
grep -Eq "dropped [1-9]" "$fs/stderr" && fail "events dropped: $(cat "$fs/stderr")"
[ -s "$fs/out/trace.perfetto-trace" ] || fail "no trace"
# Everything the recording reserved is given back: what stays is the
# output (well under 8 MiB for this program).
used=$(df -k "$fs" | awk 'NR == 2 {print $3}')
[ "$used" -lt 8192 ] || fail "$used KiB still used on the file system: $(ls -la "$fs"/out/*)"
echo "OK: absurd sizes refused; 1G on 128M bounded, $used KiB used after the run"
