#!/bin/sh
# End to end: `xptrace run --opencl` on a real OpenCL program gives API
# calls named by function, device tasks and a trace that decodes.
#   run_xptrace.sh <xptrace> <program> <perfetto_min.proto dir>
set -u
xptrace=$1 program=$2 protodir=$3
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$xptrace" run --opencl -c stats,perfetto -o "$out/o" -- "$program" >"$out/stdout" 2>"$out/stderr" ||
  { cat "$out/stderr"; fail "xptrace run exited $?"; }
grep -q '^vadd rounds=3 ' "$out/stdout" || fail "program output: $(cat "$out/stdout")"
csv=$(ls "$out"/o/*/stats.csv | head -n 1) # the process's own folder
for row in 'opencl.api,function_with_args,clEnqueueNDRangeKernel,span,3,' \
           'opencl.api,function_with_args,clSetKernelArg,span,3,' \
           'opencl.graph,task,vadd,span,3,' \
           'opencl.graph,timed,vadd,span,3,'; do
  grep -q "^$row" "$csv" || { cat "$csv"; fail "no row $row"; }
done
grep -q '<no event>' "$csv" && fail "unnamed API calls in $csv"
if command -v protoc >/dev/null 2>&1; then
  protoc --decode=perfetto.protos.Trace -I "$protodir" "$protodir/perfetto_min.proto" \
    <"$out/o/trace.perfetto-trace" >"$out/decoded" 2>"$out/protoc.err" || fail "protoc: $(cat "$out/protoc.err")"
  grep -q 'name: "clEnqueueNDRangeKernel"' "$out/decoded" || fail "no named API slice in the trace"
  grep -q 'name: "vadd"' "$out/decoded" || fail "no kernel task in the trace"
fi
exit 0
