#!/usr/bin/env python3
"""Tests of `xptrace report` against fixture traces of known content.

  check_report.py XPTRACE SRC_DIR OUT_DIR CASE [--regen]
  check_report.py XPTRACE SRC_DIR OUT_DIR real PROGRAM
  check_report.py XPTRACE SRC_DIR OUT_DIR real_windows PROGRAM (tests/perfetto/pt_windows.c)

Fixtures: run_a.textproto, run_b.textproto and run_w.textproto (a
--periods run; README.md derives every number), encoded with `protoc
--encode` through report_fixture.proto.
A case runs the report in OUT_DIR (relative paths, so the output does
not depend on the build folder) and compares its output with
expected/<case>.<ext> byte for byte; --regen rewrites the expected file
(then read it against README.md before committing).  `real` runs
`xptrace run` on PROGRAM (tests/stats/stats_sample.c) and checks that the
report's trace point counts equal the stats collector's.
Exits 1 with a reason on the first failure."""
import csv
import json
import os
import shutil
import subprocess
import sys

XPTRACE, SRC, OUT, CASE = sys.argv[1:5]
REGEN = "--regen" in sys.argv

# case: (arguments, expected file); "A", "B" are the fixtures.
CASES = {
    "text": (["A"], "text.txt"),
    "csv": (["--format", "csv", "A"], "csv.csv"),
    "json": (["--format", "json", "--top", "0", "A"], "json.json"),
    "tree": (["--tree", "A"], "tree.txt"),
    "tree_depth": (["--tree", "--depth", "2", "--filter", "^comp", "A"], "tree_depth.txt"),
    "tree_csv": (["--tree", "--format", "csv", "A"], "tree_csv.csv"),
    "diff": (["A", "--diff", "B"], "diff.txt"),
    "diff_csv": (["--diff", "B", "--format", "csv", "A"], "diff_csv.csv"),
    "diff_json": (["--format", "json", "--diff", "B", "A"], "diff_json.json"),
    "tid": (["--tid", "101", "A"], "tid.txt"),
    "sort_top": (["--sort", "p99", "--top", "1", "--filter", "a", "A"], "sort_top.txt"),
    "folder": (["folder"], "folder.txt"),
    # the merged trace reads as its processes do (first line aside)
    "merged": (["folder/trace.perfetto-trace"], "folder.txt"),
    # a --periods run: the windows are a section of their own, not trace points
    "windows": (["W"], "windows.txt"),
    "windows_json": (["--format", "json", "W"], "windows_json.json"),
    # one section, one header: a plain CSV file; an empty one keeps its header
    "section_csv": (["--section", "counters", "--format", "csv", "A"], "section_csv.csv"),
    "section_empty": (["--section", "windows", "--format", "csv", "A"], "section_empty.csv"),
    "section_json": (["--section", "threads,processes", "--format", "json", "A"],
                     "section_json.json"),
}


def fail(msg):
    print("check_report: FAIL: " + msg)
    sys.exit(1)


def encode(name, dest):
    text = open(os.path.join(SRC, name + ".textproto")).read()
    r = subprocess.run(["protoc", "--encode=xptrace_fixture.Trace", "-I", SRC,
                        os.path.join(SRC, "report_fixture.proto")],
                       input=text.encode(), stdout=subprocess.PIPE)
    if r.returncode != 0:
        fail("protoc could not encode " + name)
    with open(dest, "wb") as f:
        f.write(r.stdout)


def report(args, status=0):
    r = subprocess.run([XPTRACE, "report"] + args, cwd=OUT, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
    if r.returncode != status:
        fail("xptrace report %s: exit %d, not %d; stderr: %s" %
             (" ".join(args), r.returncode, status, r.stderr.decode()))
    return r.stdout.decode(), r.stderr.decode()


def prepare():
    os.makedirs(OUT, exist_ok=True)
    encode("run_a", os.path.join(OUT, "a.perfetto-trace"))
    encode("run_b", os.path.join(OUT, "b.perfetto-trace"))
    encode("run_w", os.path.join(OUT, "w.perfetto-trace"))
    # A folder as `run` leaves it: a folder per process, their merged trace
    # at the top (skipped: the processes are below), a file that is not a trace.
    folder = os.path.join(OUT, "folder")
    shutil.rmtree(folder, ignore_errors=True)
    for name, trace in (("app-100", "a"), ("app-200", "b")):
        os.makedirs(os.path.join(folder, name))
        shutil.copy(os.path.join(OUT, trace + ".perfetto-trace"),
                    os.path.join(folder, name, "trace.perfetto-trace"))
    r = subprocess.run([XPTRACE, "merge", "-q", folder], stderr=subprocess.PIPE)
    if r.returncode != 0:
        fail("xptrace merge: " + r.stderr.decode())
    with open(os.path.join(folder, "app-100", "stats.csv"), "w") as f:
        f.write("not a trace\n")


def run_case(case):
    args, expected = CASES[case]
    args = [{"A": "a.perfetto-trace", "B": "b.perfetto-trace", "W": "w.perfetto-trace"}.get(a, a)
            for a in args]
    out, err = report(args)
    if err:
        fail("%s: unexpected stderr: %s" % (case, err))
    if expected.endswith(".json"):
        json.loads(out)  # well-formed
    if expected.endswith(".csv"):
        for block in out.strip("\n").split("\n\n"):
            rows = list(csv.reader(block.splitlines()))
            if any(len(r) != len(rows[0]) for r in rows):
                fail("%s: a CSV block has rows of different lengths" % case)
    if case.startswith("section_") and expected.endswith(".csv"):
        if out.count("\nsection,") + out.startswith("section,") != 1 or "\n\n" in out:
            fail("%s: not one header: %r" % (case, out))
    path = os.path.join(SRC, "expected", expected)
    if REGEN:
        with open(path, "w") as f:
            f.write(out)
        return
    want = open(path).read()
    if case == "merged":
        want = want.replace("xptrace report: folder\n", "xptrace report: folder/trace.perfetto-trace\n", 1)
    if out != want:
        for i, (x, y) in enumerate(zip(out.splitlines(), want.splitlines())):
            if x != y:
                fail("%s: line %d is\n  %r\nnot\n  %r" % (case, i + 1, x, y))
        fail("%s: %d lines, expected %d" % (case, len(out.splitlines()),
                                             len(want.splitlines())))


def one_line(err, what):
    lines = err.splitlines()
    if len(lines) != 1 or not lines[0].startswith("xptrace: "):
        fail("%s: stderr is not one 'xptrace:' line: %r" % (what, err))


def bad_input():
    data = open(os.path.join(OUT, "a.perfetto-trace"), "rb").read()
    # Cut inside a packet: what came before is reported, exit 1.
    with open(os.path.join(OUT, "cut.perfetto-trace"), "wb") as f:
        f.write(data[:len(data) // 2 + 7])
    out, err = report(["cut.perfetto-trace"], 1)
    one_line(err, "truncated trace")
    if "Trace points" not in out:
        fail("truncated trace: nothing reported of what was read")
    with open(os.path.join(OUT, "garbage.perfetto-trace"), "wb") as f:
        f.write(b"\xff" * 64)
    out, err = report(["garbage.perfetto-trace"], 1)
    one_line(err, "garbage")
    out, err = report(["missing.perfetto-trace"], 1)
    one_line(err, "missing file")
    os.makedirs(os.path.join(OUT, "empty"), exist_ok=True)
    out, err = report(["empty"], 1)
    one_line(err, "folder without traces")
    for args in (["--format", "xml", "A"], ["--top", "x", "A"], ["--depth", "0", "A"],
                 ["--filter", "(", "A"], ["A", "B"], [], ["--tree", "--diff", "B", "A"],
                 ["--pid"], ["--nope", "A"], ["--sort", "bogus", "A"],
                 ["--section", "counter", "A"], ["--section", "points,", "A"]):
        out, err = report(args, 2)
        if not err.startswith("xptrace: ") or "usage: xptrace report" not in err:
            fail("usage error %s: %r" % (args, err))


def real(program):
    d = os.path.join(OUT, "real")
    shutil.rmtree(d, ignore_errors=True)
    r = subprocess.run([XPTRACE, "run", "-o", d, "--", program], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
    if r.returncode != 0:
        fail("xptrace run: exit %d: %s" % (r.returncode, r.stderr.decode()))
    out, err = report(["--format", "json", "--top", "0", d])
    rep = json.loads(out)
    # the process's folder (<program>-<pid>/ under `run`'s folder), else the folder
    found = [os.path.join(r_, "stats.json") for r_, _, fs in os.walk(d) if "stats.json" in fs]
    if len(found) != 1:
        fail("real: %d stats.json files under %s, not 1" % (len(found), d))
    stats = json.load(open(found[0]))
    counts = {(p["name"], p["category"]): p["count"] for p in rep["points"]["rows"]}
    device = {}
    for d in rep["devices"]["rows"]:  # device work: by command over all queues
        device[d["command"]] = device.get(d["command"], 0) + d["count"]
    checked = 0
    for row in stats["rows"]:
        if row.get("kind") != "span":  # single points
            continue
        key = (row["name"], row["stream"])
        got = (device if row["type"] == "timed" else counts).get(
            row["name"] if row["type"] == "timed" else key, 0)
        if got != row["count"]:
            fail("real: %s: report counts %s, the stats collector %d" % (key, got, row["count"]))
        checked += 1
    if checked < 5:
        fail("real: only %d trace points compared" % checked)
    threads = rep["threads"]["rows"]
    if len(threads) != stats["threads"]:
        fail("real: %d threads reported, stats saw %d" % (len(threads), stats["threads"]))
    print("check_report: real: %d trace points agree with the stats collector" % checked)


def real_windows(program):
    """xptrace run --periods on pt_windows.c: the report's windows section
    has the run's 2 windows, each open at least its 0.15 s (they close 0.5 s
    after the collector starts; the program runs 1 s, so that a windows
    thread woken late on a loaded machine still opens both); the window
    slices are no trace points, and the others' counts are the stats
    collector's."""
    d = os.path.join(OUT, "real_windows")
    shutil.rmtree(d, ignore_errors=True)
    r = subprocess.run([XPTRACE, "run", "-o", d, "--periods", "realtime:0.1:0.15:2", "--",
                        program, "1.0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if r.returncode != 0:
        fail("xptrace run: exit %d: %s" % (r.returncode, r.stderr.decode()))
    rep = json.loads(report(["--format", "json", "--top", "0", d])[0])
    win = rep["windows"]["rows"]
    if len(win) != 1 or win[0]["windows"] != 2 or win[0]["min"] < 150000000 or \
            win[0]["open"] != win[0]["min"] + win[0]["max"]:
        fail("real_windows: windows %s" % win)
    points = {(p["name"], p["category"]): p["count"] for p in rep["points"]["rows"]}
    if any(c == "xptrace.windows" for _, c in points):
        fail("real_windows: windows counted as trace points: %s" % points)
    found = [os.path.join(r_, "stats.json") for r_, _, fs in os.walk(d) if "stats.json" in fs]
    stats = json.load(open(found[0]))
    checked = 0
    for row in stats["rows"]:
        if row.get("kind") != "span" or row["stream"] == "xptrace.windows":
            continue
        if points.get((row["name"], row["stream"]), 0) != row["count"]:
            fail("real_windows: %s: report %s, stats %d" %
                 (row["name"], points.get((row["name"], row["stream"])), row["count"]))
        checked += 1
    if checked != 2:
        fail("real_windows: %d trace points compared, not 2" % checked)
    text = report([d])[0]
    if "\nTime windows (--periods)\n" not in text or "\nwindows 2, open " not in text:
        fail("real_windows: no windows section in the text report:\n" + text)
    print("check_report: real_windows: 2 windows, %d ns open" % win[0]["open"])


if CASE == "real":
    os.makedirs(OUT, exist_ok=True)
    real(sys.argv[5])
    sys.exit(0)
if CASE == "real_windows":
    os.makedirs(OUT, exist_ok=True)
    real_windows(sys.argv[5])
    sys.exit(0)
prepare()
if CASE == "bad":
    bad_input()
elif CASE == "all":
    for c in CASES:
        run_case(c)
else:
    run_case(CASE)
print("check_report: %s: ok" % CASE)
