"""check_cl_run.py REPORT_JSON OUTDIR KERNEL LAUNCHES [--at-least]

An `xptrace run --opencl` of a real program (run_clpeak.sh,
run_pyopencl.sh): the trace's slices count what the statistics count,
and every launch of KERNEL (clEnqueueNDRangeKernel) has its device slice
and its graph task: LAUNCHES of each, or at least that many."""
import csv
import glob
import json
import sys

rep, out, kernel, want = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3], int(sys.argv[4])
at_least = "--at-least" in sys.argv[5:]
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
device = sum(r["count"] for r in rep["devices"]["rows"] if r["command"] == kernel)
tasks = trace.get(("opencl.graph", kernel), 0)
if (launches < want if at_least else launches != want) or device != launches or tasks != launches:
    sys.exit("FAIL: %d launches (%s%d), %d device slices and %d graph tasks of %s" %
             (launches, ">= " if at_least else "", want, device, tasks, kernel))
print("OK: %d launches of %s, each with its device slice and task; %d slices, as the statistics count"
      % (launches, kernel, sum(trace.values())))
