#!/usr/bin/env python3
"""Check stats.csv and stats.json written for stats_sample.

usage: check_stats.py DIR [--only-sample]
  --only-sample: the run had XPTRACE_STREAMS=sample, so stream
  sample.other must be absent.
Counts are exact; times have generous bounds (behaviour, not speed)."""
import csv
import json
import os
import sys

MS = 1_000_000
LONG = 20_000 * MS  # nothing in the sample takes 20 s


def fail(msg):
    print("check_stats: " + msg, file=sys.stderr)
    sys.exit(1)


def main():
    if len(sys.argv) < 2:
        fail("usage: check_stats.py DIR [--only-sample]")
    out = sys.argv[1]
    only_sample = "--only-sample" in sys.argv[2:]
    csv_path = os.path.join(out, "stats.csv")
    json_path = os.path.join(out, "stats.json")
    for p in (csv_path, json_path):
        if not os.path.isfile(p):
            fail("missing " + p)
    with open(csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    with open(json_path) as f:
        doc = json.load(f)

    by_key = {(r["stream"], r["type"], r["name"]): r for r in rows}
    if len(by_key) != len(rows):
        fail("duplicate rows in stats.csv")
    if len(doc["rows"]) != len(rows):
        fail("stats.json has %d rows, stats.csv %d" % (len(doc["rows"]), len(rows)))

    def row(stream, typ, name):
        r = by_key.get((stream, typ, name))
        if r is None:
            fail("no row %s/%s/%s; rows: %s" % (stream, typ, name, sorted(by_key)))
        return r

    def n(r, field):
        return int(r[field]) if r[field] != "" else None

    def span(stream, typ, name, count, min_each_ms):
        r = row(stream, typ, name)
        if r["kind"] != "span":
            fail("%s: kind %s" % (name, r["kind"]))
        if n(r, "count") != count:
            fail("%s: count %s, expected %d" % (name, r["count"], count))
        total, lo, hi = n(r, "total_ns"), n(r, "min_ns"), n(r, "max_ns")
        if not (count * min_each_ms * MS <= total < LONG):
            fail("%s: total %d ns out of bounds" % (name, total))
        if not (min_each_ms * MS <= lo <= hi <= total):
            fail("%s: min %d max %d inconsistent" % (name, lo, hi))
        mean = n(r, "mean_ns")
        if not (lo <= mean <= hi):
            fail("%s: mean %d outside [min, max]" % (name, mean))
        ps = [n(r, "p50_ns"), n(r, "p95_ns"), n(r, "p99_ns")]
        if not (lo <= ps[0] <= ps[1] <= ps[2] <= hi):
            fail("%s: percentiles %s not ordered within [min, max]" % (name, ps))
        if n(r, "self_ns") > total:
            fail("%s: self > total" % name)
        if n(r, "unmatched_ends") != 0 or n(r, "unclosed_begins") != 0:
            fail("%s: unexpected unmatched/unclosed" % name)
        return r

    outer = span("sample", "task", "outer", 1, 30)
    inner = span("sample", "region", "inner", 3, 10)
    # Nesting: outer's self time is its total minus inner's (give or take
    # 1 ns: with TSC stamps each value is scaled to ns and rounded alone).
    if abs(n(outer, "self_ns") - (n(outer, "total_ns") - n(inner, "total_ns"))) > 1:
        fail("outer self %s != total %s - inner %s"
             % (outer["self_ns"], outer["total_ns"], inner["total_ns"]))
    if n(inner, "self_ns") != n(inner, "total_ns"):
        fail("inner has children")
    span("sample", "task", "nap", 10, 5)
    span("sample", "function", "cfunc", 4, 1)
    span("sample", "task", "worker", 2000, 0)
    span("sample", "late:3", "latework", 6, 0)  # a tool registered late
    dev = row("sample", "timed", "devwork")  # xptrace timed slices: exact
    if (n(dev, "count"), n(dev, "total_ns"), n(dev, "min_ns"), n(dev, "max_ns")) != \
            (3, 6 * MS, 1 * MS, 3 * MS) or n(dev, "self_ns") != 6 * MS:
        fail("timed slices: %s" % dev)

    for typ, name, kind, count in (("signal", "ping", "instant", 7),
                                   ("type_30", "ping", "instant", 2),
                                   ("node_create", "node", "node", 3),
                                   ("edge_create", "edge", "edge", 2)):
        r = row("sample", typ, name)
        if r["kind"] != kind or n(r, "count") != count:
            fail("%s: kind %s count %s" % (name, r["kind"], r["count"]))
        if r["total_ns"] != "":
            fail("%s: a single point has no duration" % name)
    stray = row("sample", "task", "stray")
    if n(stray, "count") != 0 or n(stray, "unmatched_ends") != 1:
        fail("stray: count %s unmatched %s" % (stray["count"], stray["unmatched_ends"]))

    spans = 1 + 3 + 10 + 4 + 2000 + 6 + 3
    if only_sample:
        if any(r["stream"] != "sample" for r in rows):
            fail("stream filter ignored: %s" % sorted({r["stream"] for r in rows}))
    else:
        span("sample.other", "task", "elsewhere", 5, 2)
        spans += 5
    t = doc["totals"]
    if t["spans"] != spans or t["instants"] != 9 or t["nodes"] != 3 or t["edges"] != 2:
        fail("totals %s" % t)
    if t["unmatched_ends"] != 1 or t["dropped"] != 0:
        fail("totals %s" % t)
    # Rows sorted by total time (spans first).
    totals = [int(r["total_ns"]) for r in rows if r["kind"] == "span" and r["total_ns"]]
    if totals != sorted(totals, reverse=True):
        fail("rows not sorted by total time")
    print("check_stats: %d rows OK" % len(rows))


main()
