#!/bin/sh
# A real OpenCL program nobody here wrote the runtime of: pyopencl
# (Debian's python3-pyopencl) launching one kernel 2,000 times, each
# waited on, under `xptrace run --opencl`.  Every launch must be in the
# trace with its device slice, the trace must count what the statistics
# count, and nothing may be dropped.
#   run_pyopencl.sh <xptrace> <pyopencl_vadd.py>   (exit 77: no pyopencl)
set -u
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
python3 - report.json out <<'PY'
import csv, glob, json, sys
rep, out = json.load(open(sys.argv[1])), sys.argv[2]
trace = {(r["category"], r["name"]): r["count"] for r in rep["points"]["rows"]}
stats = {}
for f in glob.glob(out + "/*/stats.csv"):
    for row in csv.DictReader(open(f)):
        if row["type"] in ("function_with_args", "task"):
            k = (row["stream"], row["name"])
            stats[k] = stats.get(k, 0) + int(row["count"])
if trace != stats:
    diff = {k: (trace.get(k), stats.get(k)) for k in set(trace) | set(stats) if trace.get(k) != stats.get(k)}
    sys.exit("FAIL: trace and statistics disagree (trace, stats): %s" % diff)
launches = trace.get(("opencl.api", "clEnqueueNDRangeKernel"), 0)
device = sum(r["count"] for r in rep["devices"]["rows"] if r["command"] == "add_one")
tasks = trace.get(("opencl.graph", "add_one"), 0)
if (launches, device, tasks) != (2000, 2000, 2000):
    sys.exit("FAIL: %d launches, %d device slices, %d graph tasks of 2000" % (launches, device, tasks))
print("OK: pyopencl: 2000 launches, each with its device slice and task; trace = statistics")
PY
