#!/bin/sh
# A real OpenCL program nobody here wrote: Debian's clpeak on PoCL,
# 20,000 kernel launches timed with events, under `xptrace run --opencl`.
# Every launch must be in the trace with its device slice, the trace
# must count what the statistics count, and nothing may be dropped.
#   run_clpeak.sh <xptrace>      (exit 77: clpeak not installed)
set -u
here=$(cd "$(dirname "$0")" && pwd)
xptrace=$1
command -v clpeak >/dev/null 2>&1 || { echo "SKIP: clpeak not installed"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
"$xptrace" run --opencl -o out -- clpeak --kernel-latency --use-event-timer >run.out 2>run.err
rc=$?
[ $rc -eq 0 ] || { echo "FAIL: exit $rc"; tail -20 run.err; exit 1; }
grep -q "Kernel launch latency" run.out || { echo "FAIL: clpeak output:"; cat run.out; exit 1; }
if grep -Eq "dropped [1-9]|xpti:" run.err; then
  echo "FAIL: drops or messages:"; grep -E "dropped [1-9]|xpti:" run.err; exit 1
fi
"$xptrace" report --format json --top 0 out/trace.perfetto-trace >report.json || {
  echo "FAIL: report"; exit 1; }
python3 "$here/check_cl_run.py" report.json out global_bandwidth_v1_local_offset 20000 --at-least
