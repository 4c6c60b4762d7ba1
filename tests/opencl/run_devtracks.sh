#!/bin/sh
# Device commands on queue tracks: run PROGRAM under the layer with the
# trace collector and check that every command's device run is a slice on
# its queue's track, lasting > 0 and inside the program's run, and that
# dependent commands are linked by flows.
#   run_devtracks.sh LAYER DISPATCHER COLLECTOR PERFETTO_DIR FORMAT PROGRAM [CHECKER OPTIONS...]
set -u
layer=$1 dispatcher=$2 collector=$3 ptdir=$4 format=$5 program=$6
shift 6
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
now() { python3 -c 'import time; print(time.monotonic_ns())'; }
if [ "$format" = json ]; then tformat=json name=trace.json; else tformat=perfetto name=trace.perfetto-trace; fi
start=$(now)
XPTI_TRACE_ENABLE=1 XPTI_FRAMEWORK_DISPATCHER="$dispatcher" XPTI_SUBSCRIBERS="$collector" \
  OPENCL_LAYERS="$layer" XPTRACE_OUTPUT="$out/o" XPTRACE_TRACE_FORMAT=$tformat \
  "$program" >"$out/stdout" 2>"$out/stderr"
rc=$?
end=$(now)
[ $rc -eq 77 ] && exit 77
[ $rc -eq 0 ] || { cat "$out/stderr"; echo "FAIL: $program exited $rc"; exit 1; }
[ -s "$out/o/$name" ] || { echo "FAIL: no trace"; exit 1; }
if [ "$format" = json ]; then
  python3 "$ptdir/check_trace.py" json "$out/o/$name" --window "$start,$end" --device-min-dur 1 "$@"
else
  command -v protoc >/dev/null 2>&1 || { echo "no protoc: skipped"; exit 77; }
  python3 "$ptdir/check_trace.py" proto "$ptdir/perfetto_min.proto" "$out/o/$name" \
    --window "$start,$end" --device-min-dur 1 "$@"
fi
