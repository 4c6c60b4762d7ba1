#!/bin/sh
# run_debian_tracer.sh ZE_TRACER: document 003's cases on Debian's own
# libze_tracing_layer.so.1.  The single-threaded cases must pass as on
# ours; the cases that toggle or destroy tracers while other threads call
# (its zelTracerSetEnabled may refuse a toggle with
# ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE while a traced call is in flight)
# and reset (not exported) are run and printed, not asserted: a failure
# there is Debian's behaviour (docs/level_zero.md), a crash or a hang is not.
prog=$1
timeout 120 "$prog" rewrite nested reenable refuse self || exit 1
for c in inflight churn pairing reset; do
  timeout 120 "$prog" $c
  rc=$?
  [ $rc -le 1 ] || { echo "FAIL: $c crashed or hung ($rc)"; exit 1; }
done
exit 0
