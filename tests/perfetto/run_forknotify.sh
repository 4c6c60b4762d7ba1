#!/bin/sh
# run_forknotify.sh XPTRACE PT_FORKNOTIFY CHILDREN THREADS
# Every child of pt_forknotify must hold exactly its 100 + 100 slices and
# drop nothing (the parent's busy threads may fill their budget: not
# checked).
set -u
xptrace=$1 prog=$2 children=$3 threads=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$xptrace" run -c perfetto --buffer-size 4M -o "$work/out" -- "$prog" "$children" "$threads" \
  >"$work/stdout" 2>"$work/stderr" || { echo "FAIL: exit $?"; cat "$work/stderr"; exit 1; }
parent=$(sed -n 's/^pt_forknotify: pid \([0-9]*\),.*/\1/p' "$work/stdout")
[ -n "$parent" ] || { echo "FAIL: output"; cat "$work/stdout"; exit 1; }
n=0
for d in "$work"/out/*/; do
  pid=${d%/}; pid=${pid##*-}
  [ -d "$d" ] && [ "$pid" != "$parent" ] || continue
  "$xptrace" report --format json --top 0 "$d" >"$work/r.json" 2>/dev/null || {
    echo "FAIL: report $d"; exit 1; }
  got=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); c={x["name"]:x["count"] for x in r["points"]["rows"]}; print(c.get("child",0), c.get("child_thread",0))' "$work/r.json")
  n=$((n + 1))
  if [ "$got" != "100 100" ]; then
    echo "FAIL: child $pid: child, child_thread slices: $got, expected 100 100"
    grep -F "[$pid]" "$work/stderr"; exit 1
  fi
  if grep -F "[$pid] dropped" "$work/stderr"; then
    echo "FAIL: child $pid dropped events"; exit 1
  fi
done
[ "$n" -eq "$children" ] || { echo "FAIL: $n children traced, expected $children"; exit 1; }
echo "OK: $children children forked beside $threads notifying thread(s), each with its 200 slices"
