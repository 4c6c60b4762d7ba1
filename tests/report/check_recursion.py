#!/usr/bin/env python3
"""Recursive calls in `xptrace report`'s trace points table, as uftrace's
`report`: calls and self time count every call, the total counts a
function nested in itself on its thread once, in its outermost call (no
double counting), the mean is every call's duration over the calls.
(uftrace v0.13 on fib.c's fib(10), -pg: fib 177 calls, total 28.163us =
self 28.163us; a(5)/b mutual recursion: a total 0.800us = the outer a,
self 0.469us = the three a's own time; --avg-total: avg over all calls.)

  check_recursion.py XPTRACE SRC_DIR OUT_DIR fixture
  check_recursion.py XPTRACE SRC_DIR OUT_DIR real PROGRAM

fixture: one process, times in us; thread 100:
  main [0,200]: fib#1 [10,70] { fib#2 [12,40] { fib#3 [14,20], fib#4 [22,30] },
                                fib#5 [45,65] },
                a [80,130] { b [85,125] { a [90,120] { b [100,110] } } },
                fib [140,150]
  thread 101: fib [15,23] (while thread 100's fib#1 is open: not nested)
  fib: 7 calls, durations 60 28 6 8 20 | 10 | 8 -> total 60+10+8 = 78,
       self 12+14+6+8+20+10+8 = 78, mean 140/7 = 20, min 6, max 60,
       p50 (4th of 7) 10, p95/p99 60
  a: 2 calls (50, 30), total 50, self 10+20 = 30, mean 40
  b: 2 calls (40, 10), total 40, self 10+10 = 20, mean 25
  main: total 200, self 200-60-50-10 = 80
real: PROGRAM (fib_rec.c, -finstrument-functions) fib(20) under `xptrace
  run --functions`: the table printed at exit (the finisher's counts) and
  `report`'s (the trace read again) both give fib 21891 calls with total
  = self (fib calls only fib: the self times add up to the outermost
  call's), a and b 3 calls with self(a) + self(b) = total(a); fib's total
  is within main's."""
import os
import re
import shutil
import subprocess
import sys

XPTRACE, SRC, OUT, CASE = sys.argv[1:5]
PROGRAM = sys.argv[5] if len(sys.argv) > 5 else None


def fail(msg):
    print("check_recursion: FAIL: " + msg)
    sys.exit(1)


def run(cmd):
    r = subprocess.run(cmd, cwd=OUT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if r.returncode != 0:
        fail("%s: exit %d; stderr: %s" % (" ".join(cmd), r.returncode, r.stderr.decode()))
    return r.stdout.decode(), r.stderr.decode()


def points_csv(path):
    """{name: {column: int}} of report --section points --format csv."""
    out, _ = run([XPTRACE, "report", "--section", "points", "--format", "csv", path])
    lines = out.split()
    head = lines[0].split(",")
    if head[:6] != ["section", "name", "category", "count", "total", "self"]:
        fail("points columns: " + lines[0])
    rows = {}
    for ln in lines[1:]:
        f = ln.split(",")
        rows[f[1]] = {k: int(v) for k, v in zip(head[3:], f[3:])}
    return rows


THREADS = ('packet { trusted_packet_sequence_id: 1 track_descriptor { uuid: 1000 '
           'process { pid: 100 process_name: "fix" } } }\n'
           'packet { trusted_packet_sequence_id: 1 track_descriptor { uuid: 1001 '
           'parent_uuid: 1000 thread { pid: 100 tid: 100 thread_name: "fix" } } }\n'
           'packet { trusted_packet_sequence_id: 2 track_descriptor { uuid: 1002 '
           'parent_uuid: 1000 thread { pid: 100 tid: 101 thread_name: "w" } } }\n')


def fixture():
    ev = []  # (us, track, name or None for an end)

    def call(track, name, t0, t1, inner=()):
        ev.append((t0, track, name))
        for sub in inner:
            call(track, *sub)
        ev.append((t1, track, None))
    fib1 = ("fib", 10, 70, [("fib", 12, 40, [("fib", 14, 20), ("fib", 22, 30)]),
                            ("fib", 45, 65)])
    ab = ("a", 80, 130, [("b", 85, 125, [("a", 90, 120, [("b", 100, 110)])])])
    call(1001, "main", 0, 200, [fib1, ab, ("fib", 140, 150)])
    call(1002, "fib", 15, 23)
    text = THREADS
    for t, track, name in ev:
        body = ('track_event { type: 1 track_uuid: %d name: "%s" categories: "functions" }'
                % (track, name) if name else "track_event { type: 2 track_uuid: %d }" % track)
        text += ("packet { timestamp: %d timestamp_clock_id: 3 trusted_packet_sequence_id: %d"
                 " %s }\n" % (1000000 + t * 1000, 1 if track == 1001 else 2, body))
    return text


def case_fixture():
    r = subprocess.run(["protoc", "--encode=xptrace_fixture.Trace", "-I", SRC,
                        os.path.join(SRC, "report_fixture.proto")],
                       input=fixture().encode(), stdout=subprocess.PIPE)
    if r.returncode != 0:
        fail("protoc could not encode the fixture")
    with open(os.path.join(OUT, "rec.perfetto-trace"), "wb") as f:
        f.write(r.stdout)
    got = points_csv("rec.perfetto-trace")
    us = 1000
    want = {
        "fib": dict(count=7, total=78 * us, self=78 * us, mean=20 * us, min=6 * us,
                    max=60 * us, p50=10 * us, p95=60 * us, p99=60 * us),
        "a": dict(count=2, total=50 * us, self=30 * us, mean=40 * us, min=30 * us, max=50 * us),
        "b": dict(count=2, total=40 * us, self=20 * us, mean=25 * us, min=10 * us, max=40 * us),
        "main": dict(count=1, total=200 * us, self=80 * us, mean=200 * us),
    }
    for name, cols in want.items():
        row = got.get(name)
        if row is None:
            fail("no row %s: %s" % (name, got))
        for col, v in cols.items():
            if row[col] != v:
                fail("%s %s is %d, not %d (row %s)" % (name, col, row[col], v, row))


def table_rows(text):
    """The text table at exit: {name: [count, total, self]} as printed."""
    rows = {}
    for ln in text.splitlines():
        f = ln.split()
        if len(f) == 11 and f[1] == "xptrace.functions":
            rows[f[0]] = f[2:5]
    return rows


def case_real():
    run_dir = os.path.join(OUT, "fib")
    shutil.rmtree(run_dir, ignore_errors=True)
    _, err = run([XPTRACE, "run", "--functions", "-o", run_dir, "--", PROGRAM, "20"])
    at_exit = table_rows(err)
    for name, calls in (("fib", "21891"), ("a", "3"), ("b", "3"), ("main", "1"), ("halve", "1")):
        if name not in at_exit or at_exit[name][0] != calls:
            fail("table at exit: %s not %s calls:\n%s" % (name, calls, err))
    if at_exit["fib"][1] != at_exit["fib"][2]:
        fail("table at exit: fib's total is not its self time (recursion counted more than "
             "once?):\n" + err)
    got = points_csv(run_dir)
    fib, a, b, main = got["fib"], got["a"], got["b"], got["main"]
    if (fib["count"], a["count"], b["count"]) != (21891, 3, 3):
        fail("report: calls %s" % got)
    if fib["total"] != fib["self"] or fib["total"] > main["total"]:
        fail("report: fib total %d, self %d, main total %d: recursion counted more than once"
             % (fib["total"], fib["self"], main["total"]))
    if a["self"] + b["self"] != a["total"] or b["total"] > a["total"]:
        fail("report: a total %d, self %d; b total %d, self %d: not the outermost a's time"
             % (a["total"], a["self"], b["total"], b["self"]))
    if fib["mean"] * fib["count"] < fib["total"]:
        fail("report: fib's mean %d is not over every call's duration" % fib["mean"])
    for name in ("fib", "a", "b"):
        if re.sub(r"\s", "", at_exit[name][0]) != str(got[name]["count"]):
            fail("the table at exit and report disagree on %s: %s / %s"
                 % (name, at_exit[name], got[name]))


os.makedirs(OUT, exist_ok=True)
globals()["case_" + CASE]()
print("check_recursion: %s ok" % CASE)
