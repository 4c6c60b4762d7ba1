#!/bin/sh
# run_graph.sh LAYER DISPATCHER SUBSCRIBER EXPECTED PROGRAM [ARGS...]: run
# under the layer with the recording subscriber; the reconstructed graph
# must equal EXPECTED, and the output must equal the plain run's.
layer=$1 dispatcher=$2 subscriber=$3 expected=$4; shift 4
out=${TMPDIR:-/tmp}/xpt_cl_graph.$$
env -u OPENCL_LAYERS "$@" >"$out.plain" 2>&1
rc=$?
[ $rc -eq 77 ] && { rm -f "$out".*; exit 77; }
XPTI_TRACE_ENABLE=1 XPTI_FRAMEWORK_DISPATCHER="$dispatcher" XPTI_SUBSCRIBERS="$subscriber" \
  OPENCL_LAYERS="$layer" XPT_CLTEST_OUT="$out.graph" "$@" >"$out.traced" 2>&1 || { cat "$out.traced"; rc=1; }
status=0
diff -u "$out.plain" "$out.traced" || { echo "FAIL: program output changed"; status=1; }
program=$1
has_lines=0
readelf -S "$program" 2>/dev/null | grep -q '\.debug_line' && has_lines=1
if [ $has_lines -eq 1 ] && grep -q '@?:4294967295' "$out.graph" 2>/dev/null; then
  echo "FAIL: $program has line information but call sites were not resolved"
  status=1
fi
if [ $has_lines -eq 0 ] && grep -q '@?:4294967295' "$out.graph" 2>/dev/null; then
  # A build without debug information: the nodes are still keyed by code
  # address; compare without locations.
  echo "note: no line information in $program; comparing structure only"
  sed 's/@[^ ]*//g' "$expected" | sort >"$out.exp"
  sed 's/@[^ ]*//g' "$out.graph" | sort >"$out.got"
  diff -u "$out.exp" "$out.got" || { echo "FAIL: graph differs from $expected"; status=1; }
else
  diff -u "$expected" "$out.graph" || { echo "FAIL: graph differs from $expected"; status=1; }
fi
[ $rc -ne 0 ] && status=1
rm -f "$out".*
exit $status
