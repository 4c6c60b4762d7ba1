#!/bin/sh
# check_pairs.sh XPTRACE STATS_PAIRS: the statistics and the trace of
# stats_pairs both hold 10,000 matched pairs of each shape.
set -u
xptrace=$1 prog=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$xptrace" run -c stats,perfetto -o "$work/out" -- "$prog" >"$work/stdout" 2>"$work/stderr" ||
  { echo "FAIL: exit $?"; cat "$work/stderr"; exit 1; }
"$xptrace" report --format json --top 0 "$work/out/trace.perfetto-trace" >"$work/r.json" ||
  { echo "FAIL: report"; exit 1; }
python3 - "$work/out" "$work/r.json" <<'PY'
import csv, glob, json, sys
out, rep = sys.argv[1], json.load(open(sys.argv[2]))
want = {"owned": 10000, "copied": 10000, "instanced": 10000}
rows = [r for f in glob.glob(out + "/*/stats.csv") for r in csv.DictReader(open(f))
        if r["stream"] == "pairs.test"]
stats = {r["name"]: (int(r["count"]), int(r["unmatched_ends"]), int(r["unclosed_begins"]))
         for r in rows}
if stats != {k: (v, 0, 0) for k, v in want.items()}:
    sys.exit("FAIL: statistics (count, unmatched ends, unclosed begins): %s" % stats)
trace = {r["name"]: r["count"] for r in rep["points"]["rows"] if r["category"] == "pairs.test"}
if trace != want:
    sys.exit("FAIL: trace counts %s, expected %s" % (trace, want))
print("OK: the statistics and the trace pair alike: %s" % want)
PY
