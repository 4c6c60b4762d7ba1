#!/bin/sh
# A real OpenCL program nobody here wrote: Debian's clpeak on PoCL,
# 20,000 kernel launches timed with events, under `xptrace run --opencl`.
# Every launch must be in the trace with its device slice, the trace
# must count what the statistics count, and nothing may be dropped.
#   run_clpeak.sh <xptrace>      (exit 77: clpeak not installed)
set -u
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
python3 - report.json out <<'PY'
import csv, glob, json, sys
rep, out = json.load(open(sys.argv[1])), sys.argv[2]
trace = {(r["category"], r["name"]): r["count"] for r in rep["points"]["rows"]}
stats = {}
for f in glob.glob(out + "/*/stats.csv"):
    for row in csv.DictReader(open(f)):
        if row["type"] == "function_with_args" or row["type"] == "task":
            k = (row["stream"], row["name"])
            stats[k] = stats.get(k, 0) + int(row["count"])
if trace != stats:
    diff = {k: (trace.get(k), stats.get(k)) for k in set(trace) | set(stats) if trace.get(k) != stats.get(k)}
    sys.exit("FAIL: trace and statistics disagree (trace, stats): %s" % diff)
launches = trace.get(("opencl.api", "clEnqueueNDRangeKernel"), 0)
device = sum(r["count"] for r in rep["devices"]["rows"])
tasks = sum(c for (cat, _), c in trace.items() if cat == "opencl.graph")
if launches < 20000 or device != launches or tasks != launches:
    sys.exit("FAIL: %d launches, %d device slices, %d graph tasks" % (launches, device, tasks))
print("OK: %d launches, each with its device slice; %d slices as counted by the statistics"
      % (launches, sum(trace.values())))
PY
