#!/bin/sh
# `xptrace run --level-zero` end to end on ze_vadd (two queues, events
# across them) through Debian's loader and the CPU test driver:
#   run_xptrace.sh XPTRACE ZE_VADD PERFETTO_DIR ROUNDS N MODE [run options...]
# MODE events: every command signals an event of the program's; plain:
# two of four do not (the layer's own events time them; 3 dependencies);
# immediate: the four in order on an immediate list, one event (4
# dependencies: list order, the next round's upload after the download).
# The program's output is the plain run's; every API call is a slice of
# level_zero.api (stats rows); in the trace every command's device run is
# a slice on its queue's track (2 queues, 4 commands a round), inside the
# run, the 4 dependencies (list order, 2 cross-queue waits of the kernel,
# the download's wait) are flows between device slices that never end
# before they start, and nothing was dropped; the 4 nodes carry their
# call sites (ze_vadd.c:LINE, when the program has line information); `xptrace report` shows the
# device time per command; with --counters, counter tracks in the same
# trace; `xptrace avail` lists the two streams.
set -u
xptrace=$1 program=$2 ptdir=$3 rounds=$4 n=$5 mode=$6
shift 6
deps=4 lanes=2 lane="Level Zero queue=2"
[ "$mode" = plain ] && deps=3
[ "$mode" = immediate ] && deps=4 lanes=1 lane="Level Zero immediate list=1"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
now() { python3 -c 'import time; print(time.monotonic_ns())'; }

"$program" "$rounds" "$n" "$mode" >"$out/plain" 2>&1 || fail "plain run: $(cat "$out/plain")"
start=$(now)
"$xptrace" run --level-zero "$@" -c stats,perfetto -o "$out/o" -- "$program" "$rounds" "$n" "$mode" \
  >"$out/stdout" 2>"$out/stderr"
rc=$?
[ $rc -eq 0 ] || { cat "$out/stderr"; fail "xptrace run exited $rc"; }
end=$(now)
cmp -s "$out/plain" "$out/stdout" || fail "output changed: $(cat "$out/stdout")"
csv=$(ls "$out"/o/*/stats.csv | head -n 1)
copies=$((3 * rounds))
submits="level_zero.api,function_with_args,zeCommandQueueExecuteCommandLists,span,$copies,"
[ "$mode" = immediate ] && submits="level_zero.api,function_with_args,zeCommandListCreateImmediate,span,1,"
for row in "level_zero.api,function_with_args,zeCommandListAppendMemoryCopy,span,$copies," \
           "level_zero.api,function_with_args,zeCommandListAppendLaunchKernel,span,$rounds," \
           "$submits" \
           "level_zero.graph,task,vadd,span,$rounds," \
           "level_zero.graph,timed,vadd,span,$rounds," \
           "level_zero.graph,timed,zeCommandListAppendMemoryCopy,span,$copies,"; do
  grep -q "^$row" "$csv" || { cat "$csv"; fail "no row $row"; }
done
command -v protoc >/dev/null 2>&1 || { echo "no protoc: trace not checked"; exit 77; }
python3 "$ptdir/check_trace.py" proto "$ptdir/perfetto_min.proto" "$out/o/trace.perfetto-trace" \
  --window "$start,$end" --device-min-dur 1 --device-slices $((4 * rounds)) --device-lanes $lanes \
  "--lanes=$lane" --device-flows $deps --edges $deps --name vadd=$((2 * rounds + 1)) \
  >"$out/check" 2>&1 || { cat "$out/check"; fail "check_trace"; }
cat "$out/check"
# nodes keyed by the program's call sites: file:line when it has line info
if readelf -S "$program" 2>/dev/null | grep -q '\.debug_line'; then
  protoc --decode=perfetto.protos.Trace -I "$ptdir" "$ptdir/perfetto_min.proto" \
    <"$out/o/trace.perfetto-trace" >"$out/decoded" || fail "protoc"
  sites=$(grep -o 'ze_vadd\.c:[0-9]*"' "$out/decoded" | sort -u | wc -l)
  [ "$sites" -eq 4 ] || fail "$sites call sites of ze_vadd.c in the nodes, expected 4"
fi
grep -q ' dropped=0 ' "$out/check" || fail "events dropped"
case " $* " in *" --counters "*)
  grep -Eq ' counters=[1-9]' "$out/check" || fail "no counter tracks in the one timeline";;
esac
"$xptrace" avail >"$out/avail" 2>&1 || fail "avail"
grep -q '^  level_zero.api ' "$out/avail" && grep -q '^  level_zero.graph ' "$out/avail" ||
  fail "avail does not list the level_zero streams"
"$xptrace" report "$out/o" >"$out/report" 2>&1 || { cat "$out/report"; fail "report"; }
grep -Eq "^vadd +Level Zero (queue|immediate list) [0-9]+ .* $rounds " "$out/report" ||
  { cat "$out/report"; fail "no device time of vadd in the report"; }
exit 0
