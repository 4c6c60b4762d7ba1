#!/usr/bin/env python3
"""Issue 8, row 3: run closed_fds (early and late) under the stats, text
and (when given) perfetto collectors; the files they write must be
whole, with none of our messages or text lines inside.

  check_closed_fds.py FIXTURE DISPATCHER STATS TEXT SCRATCH [PERFETTO PROTOC PROTO CHECKER]
"""
import csv
import json
import os
import shutil
import subprocess
import sys

fixture, dispatcher, stats, text, scratch = sys.argv[1:6]
perfetto = sys.argv[6:10] if len(sys.argv) >= 10 else None
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg, file=sys.stderr)


MARKERS = [b"xptrace stats", b"xpti:", b"xptiTraceInit", b"task_begin"]

shutil.rmtree(scratch, ignore_errors=True)
os.makedirs(scratch)
for mode in ("early", "late"):
    out = os.path.join(scratch, mode)
    subs = [stats, text] + ([perfetto[0]] if perfetto else [])
    env = dict(os.environ, XPTI_TRACE_ENABLE="1", XPTI_FRAMEWORK_DISPATCHER=dispatcher,
               XPTI_SUBSCRIBERS=",".join(subs), XPTRACE_OUTPUT=out)
    env.pop("XPTI_TEXT_OUTPUT", None)
    err_path = os.path.join(scratch, mode + ".stderr")
    with open(err_path, "wb") as err:
        rc = subprocess.run([fixture, mode], env=env, stderr=err, stdout=subprocess.DEVNULL,
                            timeout=60).returncode
    if rc != 0:
        fail(f"{mode}: exit {rc}")
    err = open(err_path, "rb").read()
    # What we print goes to the stderr the program had when we loaded.
    if mode == "early":
        if b"xptrace stats:" not in err or b"closed task_begin" not in err:
            fail(f"early: table or text lines missing from the original stderr: {err[:300]!r}")
    elif err:
        fail(f"late: something reached the closed stderr's file: {err[:300]!r}")
    for name in sorted(os.listdir(out)):
        data = open(os.path.join(out, name), "rb").read()
        for m in MARKERS:
            if m in data:
                fail(f"{mode}: {name} contains {m!r}")
    try:
        rows = list(csv.reader(open(os.path.join(out, "stats.csv"))))
        if rows[0][:3] != ["stream", "type", "name"] or any(len(r) != 15 for r in rows):
            fail(f"{mode}: stats.csv malformed: {rows[:3]}")
        if not any(r[:5] == ["closed", "task", "work", "span", "100"] for r in rows):
            fail(f"{mode}: stats.csv lacks the 100 'work' spans: {rows}")
        doc = json.load(open(os.path.join(out, "stats.json")))
        if doc["totals"]["spans"] != 100:
            fail(f"{mode}: stats.json totals {doc['totals']}")
    except (OSError, ValueError, KeyError, IndexError) as e:
        fail(f"{mode}: stats files: {e}")
    if perfetto:
        _, protoc, proto, checker = perfetto
        trace = os.path.join(out, "trace.perfetto-trace")
        r = subprocess.run([sys.executable, checker, "proto", proto, trace, "--slices", "100"],
                           env=dict(os.environ, PROTOC=protoc), capture_output=True, text=True)
        if r.returncode != 0:
            fail(f"{mode}: trace does not decode: {r.stdout}{r.stderr}")
print("closed fds:", "FAILED" if failures else "ok")
sys.exit(1 if failures else 0)
