#!/usr/bin/env python3
"""Issue 8 rows 11 and 7 under the statistics collector (stats_churn.c).

usage: check_churn.py churn PROGRAM THREADS OUTDIR
         peak RSS traced < untraced + 32 MiB, and every pair of every
         thread in stats.csv;
       check_churn.py rows PROGRAM THREADS OUTDIR
         rows of ended threads merged exactly: counts, totals, min/max,
         percentiles, copied names, begins left open;
       check_churn.py signal PROGRAM OUTDIR
         a signal handler's events while its thread records: the program
         ends, and recorded + dropped = the handler calls;
       check_churn.py names PROGRAM N OUTDIR
         N names given as user data in one reused buffer, twice: N rows,
         each of count 2.
The collector comes from the environment (XPTI_FRAMEWORK_DISPATCHER,
XPTI_SUBSCRIBERS).  A run that takes longer than RUN_LIMIT s is a hang."""
import csv
import json
import os
import shutil
import subprocess
import sys

RUN_LIMIT = 50
SLACK_KB = 32 * 1024


def fail(msg):
    print("check_churn: " + msg, file=sys.stderr)
    sys.exit(1)


def run(args, enable, out):
    env = dict(os.environ, XPTI_TRACE_ENABLE=enable, XPTRACE_OUTPUT=out)
    shutil.rmtree(out, ignore_errors=True)
    try:
        p = subprocess.run(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=RUN_LIMIT)
    except subprocess.TimeoutExpired:
        fail("%s hung (more than %d s)" % (" ".join(args), RUN_LIMIT))
    if p.returncode != 0:
        fail("%s: exit %d\n%s" % (" ".join(args), p.returncode, p.stderr))
    values = {}
    for line in p.stdout.splitlines():
        key, _, value = line.partition(" ")
        values[key] = int(value)
    return values


def report(out):
    with open(os.path.join(out, "stats.csv"), newline="") as f:
        rows = {(r["stream"], r["type"], r["name"]): r for r in csv.DictReader(f)}
    with open(os.path.join(out, "stats.json")) as f:
        return rows, json.load(f)


def churn(prog, threads, out):
    plain = run([prog, "churn", str(threads)], "0", out + "-untraced")
    traced = run([prog, "churn", str(threads)], "1", out)
    # ru_maxrss may hold the launcher's peak from before exec: VmHWM too.
    for key in ("maxrss_kb", "vmhwm_kb"):
        print("check_churn: %d threads, peak RSS (%s) %d KiB untraced, %d KiB traced"
              % (threads, key, plain[key], traced[key]))
        if traced[key] >= plain[key] + SLACK_KB:
            fail("traced peak RSS %d KiB >= untraced %d KiB + 32 MiB (%s)"
                 % (traced[key], plain[key], key))
    rows, doc = report(out)
    row = rows.get(("churn", "task", "churn"))
    if row is None or int(row["count"]) != threads:
        fail("churn row: %s, expected count %d" % (row, threads))
    t = doc["totals"]
    if t["spans"] != threads or t["dropped"] != 0 or t["unclosed_begins"] != 0:
        fail("totals %s" % t)
    if doc["threads"] != threads:
        fail("threads %d, expected %d" % (doc["threads"], threads))


def rows_merged(prog, threads, out):
    run([prog, "rows", str(threads)], "1", out)
    rows, doc = report(out)

    def row(typ, name):
        r = rows.get(("churn", typ, name))
        if r is None:
            fail("no row %s/%s; rows: %s" % (typ, name, sorted(rows)))
        return r

    if int(row("task", "churn")["count"]) != threads:
        fail("churn count %s" % row("task", "churn")["count"])
    # Slice i lasts exactly (i+1) us: every figure is known.
    s = row("timed", "slice")
    us = 1000
    exact = {"count": threads, "total_ns": us * threads * (threads + 1) // 2,
             "min_ns": us, "max_ns": us * threads}
    for k, v in exact.items():
        if int(s[k]) != v:
            fail("slice %s: %s, expected %d" % (k, s[k], v))
    for q, k in ((0.50, "p50_ns"), (0.95, "p95_ns"), (0.99, "p99_ns")):
        want = us * -(-int(q * threads * 1000) // 1000)  # value at rank ceil(q n)
        if abs(int(s[k]) - want) > want / 128:
            fail("slice %s: %s, expected %d within 1/128" % (k, s[k], want))
    for k in range(3):
        n = len(range(k, threads, 3))
        if int(row("function", "fn%d" % k)["count"]) != n:
            fail("fn%d count %s, expected %d" % (k, row("function", "fn%d" % k)["count"], n))
    opened = row("task", "open")
    if int(opened["unclosed_begins"]) != len(range(0, threads, 100)) or int(opened["count"]) != 0:
        fail("open: %s" % opened)
    if doc["totals"]["dropped"] != 0 or doc["threads"] != threads:
        fail("totals %s, threads %d" % (doc["totals"], doc["threads"]))


def signal(prog, out):
    got = run([prog, "signal"], "1", out)
    calls = got["handler_calls"]
    rows, doc = report(out)
    tick = rows.get(("churn", "signal", "tick"))
    recorded = int(tick["count"]) if tick else 0
    dropped = doc["totals"]["dropped"]
    loop = rows.get(("churn", "task", "loop"))
    print("check_churn: %d handler calls: %d recorded, %d dropped; %d pairs"
          % (calls, recorded, dropped, got["pairs"]))
    if calls == 0:
        fail("the handler never ran")
    if recorded + dropped != calls:
        fail("recorded %d + dropped %d != handler calls %d" % (recorded, dropped, calls))
    if loop is None or int(loop["count"]) != got["pairs"]:
        fail("loop row %s, expected %d pairs" % (loop, got["pairs"]))


def many_names(prog, n, out):
    run([prog, "names", str(n)], "1", out)
    rows, doc = report(out)
    names = {k[2]: int(r["count"]) for k, r in rows.items() if k[:2] == ("churn", "function")}
    want = {"name%d" % i: 2 for i in range(n)}
    if names != want:
        missing = sorted(set(want) - set(names))[:5]
        extra = sorted(set(names) - set(want))[:5]
        wrong = sorted(k for k in names if k in want and names[k] != 2)[:5]
        fail("function rows: %d, expected %d (missing %s, extra %s, wrong counts %s)"
             % (len(names), n, missing, extra, wrong))
    if doc["totals"]["dropped"] != 0:
        fail("totals %s" % doc["totals"])


def main():
    a = sys.argv[1:]
    if len(a) == 4 and a[0] == "churn":
        churn(a[1], int(a[2]), a[3])
    elif len(a) == 4 and a[0] == "rows":
        rows_merged(a[1], int(a[2]), a[3])
    elif len(a) == 3 and a[0] == "signal":
        signal(a[1], a[2])
    elif len(a) == 4 and a[0] == "names":
        many_names(a[1], int(a[2]), a[3])
    else:
        fail("usage: check_churn.py churn|rows PROGRAM THREADS OUTDIR | signal PROGRAM OUTDIR"
             " | names PROGRAM N OUTDIR")
    print("check_churn: OK")


main()
