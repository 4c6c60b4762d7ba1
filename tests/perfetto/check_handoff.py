#!/usr/bin/env python3
"""perfetto_handoff: 10,000 tasks begun on one thread and ended on another,
then 100 slices of the first thread (tests/perfetto/pt_handoff.c), under
`xptrace run` with the trace and the statistics.  Each task must be one
slice in the trace (drawn on the stream's "ended on another thread"
track, counted as a trace point, not device time), every collector must
pair them the same way (statistics: 10,000 with the trace's total), and
nothing may be dropped, unmatched or left open.

Perfetto's nesting rules on every track are checked by check_trace.py.

  check_handoff.py XPTRACE PT_HANDOFF PT_READ_DUMP OUT [fifo]"""
import csv
import glob
import io
import os
import shutil
import subprocess
import sys

XPTRACE, PROG, DUMP, OUT = sys.argv[1:5]
MODE = sys.argv[5:6]


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


shutil.rmtree(OUT, ignore_errors=True)
p = subprocess.run([XPTRACE, "run", "-c", "perfetto,stats", "-o", OUT, "--", PROG] + MODE,
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
if p.returncode != 0 or "pt_handoff: done" not in p.stdout:
    fail("run: %d %r %s" % (p.returncode, p.stdout, p.stderr))
if "dropped" in p.stderr and "dropped 0" not in p.stderr:
    fail("drops reported: %s" % p.stderr)
dump = subprocess.run([DUMP, os.path.join(OUT, "trace.perfetto-trace")],
                      stdout=subprocess.PIPE, text=True).stdout
if " begins=10100 ends=10100 " not in dump:
    fail("the trace does not hold 10,100 whole slices: %s" % dump.strip().splitlines()[-1])
HERE = os.path.dirname(os.path.abspath(__file__))
chk = subprocess.run([sys.executable, os.path.join(HERE, "check_trace.py"), "proto",
                      os.path.join(HERE, "perfetto_min.proto"),
                      os.path.join(OUT, "trace.perfetto-trace"), "--device-slices", "10000",
                      "--slices", "10100"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                     text=True)
if chk.returncode != 0:
    fail("check_trace: %s" % chk.stdout[-2000:])
rep = subprocess.run([XPTRACE, "report", "--format", "csv", "--top", "0", OUT],
                     stdout=subprocess.PIPE, text=True).stdout
points = {r[1]: r for r in csv.reader(io.StringIO(rep)) if r and r[0] == "points"}
devices = [r for r in csv.reader(io.StringIO(rep)) if r and r[0] == "devices"]
if points.get("task", [None] * 4)[3] != "10000" or points.get("after", [None] * 4)[3] != "100":
    fail("report's trace points: %r" % points)
if devices:
    fail("handed-on tasks reported as device time: %r" % devices)
stats = glob.glob(os.path.join(OUT, "pt_handoff-*", "stats.csv"))
if len(stats) != 1:
    fail("statistics: %r" % stats)
rows = {r["name"]: r for r in csv.DictReader(open(stats[0]))}
task = rows.get("task")
if not task or task["count"] != "10000" or task["unmatched_ends"] != "0" \
        or task["unclosed_begins"] != "0":
    fail("statistics pair the tasks otherwise: %r" % task)
t_trace, t_stats = int(points["task"][4]), int(task["total_ns"])
if abs(t_trace - t_stats) > 0.01 * t_trace + 10000 * 1000:
    fail("total task time: trace %d ns, statistics %d ns" % (t_trace, t_stats))
print("ok: 10,000 handed-on tasks, trace total %d ns, statistics %d ns" % (t_trace, t_stats))
