#!/usr/bin/env python3
"""Check a run under XPTRACE_PERIODS (pt_windows.c): its JSON trace and
stats.csv.  windows_check.py DIR EXPECTED_WINDOWS [PROCESSES]; each
process folder (a forked child's too, whose windows start at its fork):
- the windows are slices "xptrace window" on the thread "xptrace-windows":
  EXPECTED_WINDOWS of them, none overlapping;
- every other begin lies inside a window (a slice begun outside one is not
  recorded, even when it ends inside), and has its end (a slice begun
  inside is recorded whole, even when it ends after the window closed);
- every instant lies inside a window;
- some slices do end after their window closed (the cut was exercised);
- the stats count of each slice equals the slices in the trace."""
import csv
import json
import os
import sys

top, expected = sys.argv[1], int(sys.argv[2])
processes = int(sys.argv[3]) if len(sys.argv) > 3 else 1
# xptrace run writes one folder per process, each with its own windows.
sub = sorted(e.path for e in os.scandir(top) if e.is_dir())
if len(sub) != processes:
    sys.exit(f"windows_check: expected {processes} process folders in {top}, found {sub}")


def check(d):
    fail = []
    events = json.load(open(f"{d}/trace.json"))
    events = events["traceEvents"] if isinstance(events, dict) else events
    windows, open_b, slices, instants = [], {}, {}, []
    for e in events:
        ph, name = e.get("ph"), e.get("name")
        if ph == "B":
            open_b.setdefault((e["pid"], e["tid"]), []).append(e)
        elif ph == "E":
            stack = open_b.get((e["pid"], e["tid"]), [])
            if not stack:
                fail.append(f"end without begin: {e}")
                continue
            b = stack.pop()
            if b["name"] != e.get("name", b["name"]):
                fail.append(f"end {e.get('name')} closes {b['name']}")
            (windows if b["name"] == "xptrace window" else
             slices.setdefault(b["name"], [])).append((b["ts"], e["ts"]))
        elif ph in ("i", "I") and name == "tick":
            instants.append(e["ts"])
    for k, st in open_b.items():
        if st:
            fail.append(f"{len(st)} unclosed begins on {k}: {st[0]['name']}")
    windows.sort()
    if len(windows) != expected:
        fail.append(f"{len(windows)} windows, expected {expected}")
    for a, b in zip(windows, windows[1:]):
        if b[0] < a[1]:
            fail.append(f"windows overlap: {a} {b}")
    inside = lambda t: any(w0 <= t <= w1 for w0, w1 in windows)
    cut = 0
    for name, ss in slices.items():
        for b, e in ss:
            if not inside(b):
                fail.append(f"{name} begun at {b} outside every window")
            if not inside(e):
                cut += 1
    outside = [t for t in instants if not inside(t)]
    if outside:
        fail.append(f"{len(outside)} instants outside the windows, e.g. {outside[0]}")
    if not instants:
        fail.append("no instant recorded")
    if cut == 0:
        fail.append("no slice ends after its window closed: the cut was not exercised")
    for name in ("main_slice", "worker_slice"):
        if not slices.get(name):
            fail.append(f"no {name} recorded")
    rows = {r["name"]: r for r in csv.DictReader(open(f"{d}/stats.csv"))}
    for name, ss in slices.items():
        got = int(rows.get(name, {}).get("count", -1))
        if got != len(ss):
            fail.append(f"stats count of {name} {got}, trace has {len(ss)}")
        if int(rows.get(name, {}).get("unmatched_ends", 0) or 0):
            fail.append(f"stats: unmatched ends of {name}")
    return fail, (f"{os.path.basename(d)}: {len(windows)} windows, {sum(map(len, slices.values()))} "
                  f"slices ({cut} ending after their window), {len(instants)} instants")


fail, summary = [], []
for d in sub:
    f, line = check(d)
    fail += [f"{os.path.basename(d)}: {x}" for x in f]
    summary.append(line)
if fail:
    print("FAIL:\n  " + "\n  ".join(fail[:20]))
    sys.exit(1)
print("PASS: " + "; ".join(summary))
