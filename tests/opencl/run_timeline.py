#!/usr/bin/env python3
"""One timeline (issue 10, "Done means"): `xptrace run --sample --opencl
--counters default` on cl_vadd gives ONE merged trace holding the API
slices, the graph (every edge a flow from source to target), the device
slices, the samples and the counter tracks, with nothing dropped on the
way (each part's count equals its own trace's) and no pid moved; and
`xptrace report` on the folder prints every section, the same report as on
the merged trace.

  run_timeline.py XPTRACE PROGRAM PERFETTO_DIR SCRATCH

Under TSan the run has no --sample (TSan delays signals to points of its
own, so the timer sampler's handler would see another stack: the sampler
tests skip TSan for the same reason); everything else is checked."""
import json
import os
import re
import shutil
import subprocess
import sys

xptrace, program, ptdir, scratch = sys.argv[1:5]
SANITIZE = os.environ.get("XPTRACE_TEST_SANITIZE", "")
# Not under TSan (it delays signals) nor ASan (its slow stack traces, which
# PoCL's leak suppressions need, deadlock with the sanitizer build's linked
# libunwind when two threads allocate at once).
SAMPLE = not SANITIZE
if SANITIZE:  # our sanitized sampler preloaded into the sanitized program
    os.environ["ASAN_OPTIONS"] = (os.environ.get("ASAN_OPTIONS", "") +
                                  ":verify_asan_link_order=0").lstrip(":")


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def check_trace(trace, *opts):
    """check_trace.py on one trace; its summary as a dict of numbers."""
    r = subprocess.run([sys.executable, os.path.join(ptdir, "check_trace.py"), "proto",
                        os.path.join(ptdir, "perfetto_min.proto"), trace] + list(opts),
                       capture_output=True, text=True)
    if r.returncode != 0 or "check_trace: OK" not in r.stdout:
        fail("check_trace %s: %s%s" % (trace, r.stdout, r.stderr))
    text = r.stdout.replace("cross-process flows", "cross_flows").replace("device ", "device_")
    return {k: int(v) for k, v in re.findall(r"([a-z_]+)=(\d+)", text)}


def report(path, *opts):
    r = subprocess.run([xptrace, "report"] + list(opts) + [path], capture_output=True, text=True)
    if r.returncode != 0 or r.stderr:
        fail("xptrace report %s exited %d: %s" % (path, r.returncode, r.stderr))
    return r.stdout


if not shutil.which("protoc"):
    print("no protoc: skipped")
    sys.exit(77)
shutil.rmtree(scratch, ignore_errors=True)
os.makedirs(scratch)
out = os.path.join(scratch, "run")
cmd = [xptrace, "run"] + (["--sample"] if SAMPLE else []) + \
    ["--opencl", "--counters", "default", "-o", out, "--", program]
env = dict(os.environ, XPTRACE_SAMPLE_FREQ="250")
r = subprocess.run(cmd, capture_output=True, text=True, env=env)
if r.returncode == 77:
    print(r.stdout + r.stderr)
    sys.exit(77)  # no OpenCL device
if r.returncode != 0:
    fail("xptrace run exited %d: %s" % (r.returncode, r.stderr))
if not r.stdout.startswith("vadd rounds=3 "):
    fail("program output: %r" % r.stdout)
err = r.stderr
merged = os.path.join(out, "trace.perfetto-trace")
if "xptrace: trace %s " % merged not in err:
    fail("no merged trace named: " + err)
if "is another process's too" in err or "merge:" in err:
    fail("the merge moved a pid or failed: " + err)
procs = [d for d in os.listdir(out) if os.path.isdir(os.path.join(out, d))]
if len(procs) != 1 or not procs[0].startswith("cl_vadd-"):
    fail("process folders: %s" % procs)
pid = int(procs[0].rsplit("-", 1)[1])
events = os.path.join(out, procs[0], "trace.perfetto-trace")
counters = os.path.join(out, procs[0], "counters.perfetto-trace")
samples = os.path.join(out, "samples.perfetto-trace")
for f in [events, counters] + ([samples] if SAMPLE else []):
    if not os.path.isfile(f):
        fail("missing %s (folder: %s)" % (f, sorted(os.listdir(out))))

# The merged trace: every part, one process, the checker's invariants
# (callstacks resolve, edges are flows source -> target, no false
# nesting, counters that only grow never decrease).
opts = ["--processes", "1", "--process-name", "cl_vadd=1", "--main-thread", "cl_vadd",
        "--edges", "4", "--device-slices", "12", "--device-lanes", "1", "--device-flows", "4",
        "--name", "clEnqueueNDRangeKernel=3",
        "--counter", "thread-cpu-time>=1", "--counter", "rss>=1", "--counter", "peak-rss>=1",
        "--counter", "task-clock>=1", "--counter", "page-faults>=1"]
if SAMPLE:
    opts += ["--min-perf-samples", "1"]
m = check_trace(merged, *opts)
e = check_trace(events)
c = check_trace(counters)
for k in ("slices", "nodes", "edges", "flows", "device_slices", "device_flows"):
    if m[k] != e[k]:
        fail("merged %s %d, the process's trace %d" % (k, m[k], e[k]))
if m["counters"] != c["counters"] or m["counters"] < 5:
    fail("merged counter tracks %d, counters trace %d" % (m["counters"], c["counters"]))
n_samples = 0
if SAMPLE:
    s = check_trace(samples)
    n_samples = s["perf_samples"]
    if m.get("perf_samples") != n_samples:
        fail("merged samples %s, samples trace %d" % (m.get("perf_samples"), n_samples))
if m["processes"] != 1 or "cl_vadd %d" % pid not in subprocess.run(
        [sys.executable, os.path.join(ptdir, "check_trace.py"), "proto",
         os.path.join(ptdir, "perfetto_min.proto"), merged], capture_output=True,
        text=True).stdout:
    fail("the merged trace's process is not cl_vadd %d" % pid)

# The report on the folder: every section, equal to the merged trace's.
folder = json.loads(report(out, "--format", "json", "--top", "0"))
whole = json.loads(report(merged, "--format", "json", "--top", "0"))
folder.pop("source"), whole.pop("source")
if folder != whole:
    fail("report of the folder and of the merged trace differ")
rows = {k: v["rows"] for k, v in folder.items() if isinstance(v, dict) and "rows" in v}
points = {(x["name"], x["category"]): x for x in rows["points"]}
for name, n in (("clEnqueueNDRangeKernel", 3), ("clEnqueueWriteBuffer", 6),
                ("clEnqueueReadBuffer", 3), ("clBuildProgram", 1)):
    if points.get((name, "opencl.api"), {}).get("count") != n:
        fail("trace point %s: %s" % (name, points.get((name, "opencl.api"))))
dev = {x["command"]: x["count"] for x in rows["devices"]}
if dev != {"vadd": 3, "clEnqueueWriteBuffer": 6, "clEnqueueReadBuffer": 3}:
    fail("device commands: %s" % dev)
names = {x["counter"] for x in rows["counters"]}
for want in ("thread-cpu-time", "rss", "peak-rss", "task-clock", "page-faults"):
    if want not in names:
        fail("no counter %s in the report: %s" % (want, sorted(names)))
if len(rows["processes"]) != 1:
    fail("processes: %s" % rows["processes"])
p = rows["processes"][0]
if (p["pid"], p["name"], p["device"], p["samples"]) != (pid, "cl_vadd", 12, n_samples):
    fail("process row: %s (samples in the trace: %d)" % (p, n_samples))
main = [t for t in rows["threads"] if t["tid"] == pid]
if not main or main[0]["name"] != "cl_vadd" or main[0]["slices"] < 40:
    fail("main thread row: %s" % main)
if sum(t["slices"] for t in rows["threads"]) != p["slices"] or \
        sum(t.get("samples", 0) for t in rows["threads"]) != n_samples:
    fail("threads do not add up to the process: %s" % rows["threads"])
if SAMPLE:
    if sum(x["self"] for x in rows["functions"]) != n_samples:
        fail("functions' self samples do not add up to %d" % n_samples)
text = report(out, "--top", "3")
for title in (["Top functions (samples)"] if SAMPLE else []) + [
        "Trace points (slices on threads)", "Device time per command", "Counters",
        "Processes", "Threads"]:
    if "\n" + title + "\n" not in text:
        fail("no section %r in the text report:\n%s" % (title, text))
print("run_timeline: OK: %d slices, %d device slices, %d flows, %d samples, %d counter tracks, "
      "one process" % (m["slices"], m["device_slices"], m["flows"], n_samples, m["counters"]))
shutil.rmtree(scratch, ignore_errors=True)
