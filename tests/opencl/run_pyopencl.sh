#!/bin/sh
# A real OpenCL program nobody here wrote the runtime of: pyopencl
# (Debian's python3-pyopencl) launching one kernel 2,000 times, each
# waited on, under `xptrace run --opencl`.  Every launch must be in the
# trace with its device slice, the trace must count what the statistics
# count, and nothing may be dropped.
#   run_pyopencl.sh <xptrace> <pyopencl_vadd.py>   (exit 77: no pyopencl)
set -u
here=$(cd "$(dirname "$0")" && pwd)
xptrace=$1 script=$2
py=/usr/bin/python3
"$py" -c "import pyopencl" 2>/dev/null || { echo "SKIP: python3-pyopencl not installed"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
PYOPENCL_CTX=0 "$xptrace" run --opencl -o out -- "$py" "$script" 2000 >run.out 2>run.err
rc=$?
[ $rc -eq 0 ] || { echo "FAIL: exit $rc"; tail -20 run.err; exit 1; }
grep -q "^launches 2000 checksum 2048000$" run.out || { echo "FAIL: program output:"; cat run.out; exit 1; }
if grep -Eq "dropped [1-9]|xpti:" run.err; then
  echo "FAIL: drops or messages:"; grep -E "dropped [1-9]|xpti:" run.err; exit 1
fi
"$xptrace" report --format json --top 0 out/trace.perfetto-trace >report.json || {
  echo "FAIL: report"; exit 1; }
python3 "$here/check_cl_run.py" report.json out add_one 2000
