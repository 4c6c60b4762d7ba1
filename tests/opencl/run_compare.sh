#!/bin/sh
# run_compare.sh LAYER PROGRAM [ARGS...]: the program's output and exit
# code must be identical without and with the layer (no XPTI: the layer
# must work silently, stderr included).
layer=$1; shift
out=${TMPDIR:-/tmp}/xpt_cl_cmp.$$
env -u OPENCL_LAYERS -u XPTI_FRAMEWORK_DISPATCHER -u XPTI_SUBSCRIBERS "$@" >"$out.plain" 2>&1
rc_plain=$?
[ $rc_plain -eq 77 ] && { rm -f "$out".*; exit 77; }
env -u XPTI_FRAMEWORK_DISPATCHER -u XPTI_SUBSCRIBERS OPENCL_LAYERS="$layer" "$@" >"$out.layer" 2>&1
rc_layer=$?
status=0
if [ $rc_plain -ne $rc_layer ] || ! diff -u "$out.plain" "$out.layer"; then
  echo "FAIL: output or exit code differ ($rc_plain vs $rc_layer)"; status=1
fi
[ $rc_plain -ne 0 ] && { echo "FAIL: program failed ($rc_plain)"; cat "$out.plain"; status=1; }
rm -f "$out".*
exit $status
