#!/bin/sh
# run_debian_tracer.sh ZE_TRACER: document 003's cases on Debian's own
# libze_tracing_layer.so.1.  The cases it shares with ours must pass;
# pairing (its zelTracerSetEnabled refuses a toggle while another thread
# is in a traced call) and reset (not exported) are reported, not
# asserted: docs/level_zero.md shows what they print.
prog=$1
"$prog" rewrite nested reenable refuse self inflight churn || exit 1
"$prog" pairing reset
rc=$?
[ $rc -le 1 ] || { echo "FAIL: crashed ($rc)"; exit 1; }
exit 0
