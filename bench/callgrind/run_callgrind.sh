#!/bin/bash
# Instructions per call, counted by callgrind (repeatable, unlike time).
#
#   bench/callgrind/run_callgrind.sh [BUILD_DIR]     (default: ./build)
#
# Each mode of cg_bench runs twice under callgrind, with N1 and N2 loop
# iterations, collecting only inside cg_measured(); the cost of one
# iteration is (Ir(N2) - Ir(N1)) / (N2 - N1), so one-time work (the
# proxy's first-call load, lazy binding) cancels out.  "net" subtracts
# the bare loop (mode "loop").
set -euo pipefail

build=${1:-build}
bin=$build/bin
n1=1000
n2=21000

if ! command -v valgrind >/dev/null 2>&1; then
  echo "xptrace: valgrind is not installed (apt-get install -y valgrind)" >&2
  exit 1
fi
for program in cg_bench_fw cg_bench_proxy; do
  if [ ! -x "$bin/$program" ]; then
    echo "xptrace: $bin/$program is missing: build first (cmake --build $build --target $program)" >&2
    exit 1
  fi
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# instructions PROGRAM MODE N: Ir collected inside cg_measured.
instructions() {
  local out=$work/cg.out
  env -u XPTI_FRAMEWORK_DISPATCHER -u XPTI_SUBSCRIBERS -u XPTI_TRACE_ENABLE \
    valgrind --tool=callgrind --collect-atstart=no --toggle-collect=cg_measured \
    --callgrind-out-file="$out" "$bin/$1" "$2" "$3" >/dev/null 2>"$work/valgrind.log" || {
    echo "xptrace: callgrind failed on $1 $2:" >&2
    cat "$work/valgrind.log" >&2
    exit 1
  }
  awk '/^(summary|totals):/ { print $2; exit }' "$out"
}

# per_call PROGRAM MODE: instructions of one loop iteration.
per_call() {
  local a b
  a=$(instructions "$1" "$2" $n1)
  b=$(instructions "$1" "$2" $n2)
  awk -v a="$a" -v b="$b" -v n1=$n1 -v n2=$n2 'BEGIN { printf "%.2f", (b - a) / (n2 - n1) }'
}

loop=$(per_call cg_bench_fw loop)
printf '%-58s %10s %8s\n' "operation" "Ir/iter" "net Ir"
row() { # LABEL PROGRAM MODE
  local value
  value=$(per_call "$2" "$3")
  printf '%-58s %10s %8s\n' "$1" "$value" \
    "$(awk -v v="$value" -v l="$loop" 'BEGIN { printf "%.1f", v - l }')"
}
printf '%-58s %10s %8s\n' "empty loop iteration (baseline)" "$loop" "0.0"
row "direct call, empty non-inlined function (floor)" cg_bench_fw direct-call
row "call through pointer into another .so (floor)" cg_bench_fw dso-call
row "proxy stub xptiNotifySubscribers, tracing off" cg_bench_proxy notify
row "proxy stub xptiTraceEnabled, tracing off" cg_bench_proxy trace-enabled
row "xptiNotifySubscribers, one empty callback" cg_bench_fw notify
row "  the same once a collector shares the per-thread stamp" cg_bench_fw notify-stamped
row "  one stream-wide callback, stamp used (our collectors)" cg_bench_fw notify-stream
row "xptiMakeEvent, existing payload (same registered object)" cg_bench_fw make-same
row "xptiMakeEvent, existing payload (fresh copy: key lookup)" cg_bench_fw make-copy
row "xptiFindEvent" cg_bench_fw find
row "xptiLookupString" cg_bench_fw lookup-string
echo "(Ir: instructions counted by valgrind --tool=callgrind; net = Ir/iter - loop;"
echo " the fresh-copy row includes copying the 80-byte payload)"
