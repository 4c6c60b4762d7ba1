#!/bin/sh
# Per traced call (entry + exit recorded), xptrace next to uftrace on the
# same binaries, in one run, medians of REPETITIONS (default 5) runs of
# ITERATIONS (default 1000000) calls, the runs of every configuration
# interleaved.  ns per call = the loop's ns per iteration traced minus the
# bare -O2 build's in the same run.
#   bench/functions/run_functions.sh [BUILD_DIR]
set -eu
build=${1:-build}
bin=$(cd "$build/bin" && pwd)
n=${ITERATIONS:-1000000}
reps=${REPETITIONS:-5}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
have_pg=0
[ -x "$bin/fn_bench_pg" ] && have_pg=1
have_uftrace=0
command -v uftrace >/dev/null 2>&1 && have_uftrace=1

# configuration name -> command printing ns per iteration
run_conf() {
  case $1 in
    bare-base) "$bin/fn_bench_base" "$n" ;;
    bare-pfe) "$bin/fn_bench_pfe" "$n" ;;
    bare-cyg) "$bin/fn_bench_cyg" "$n" ;;
    floor-rdtsc) "$bin/fn_bench_base" "$n" rdtsc ;;
    xp-unselected-pfe) xp "$bin/fn_bench_pfe" --functions 'no_such_function' ;;
    xp-cyg) xp "$bin/fn_bench_cyg" --functions ;;
    xp-pfe) xp "$bin/fn_bench_pfe" --functions small ;;
    xp-pg) xp "$bin/fn_bench_pg" --functions small ;;
    xp-plain) xp "$bin/fn_bench_base" --functions small ;;
    xp-fentry) (cd "$tmp" && xp "$bin/fn_bench_fentry" --functions small; rm -f gmon.out) ;;
    uf-cyg) uf "$bin/fn_bench_cyg" ;;
    uf-fentry) uf "$bin/fn_bench_fentry" ;;
    uf-pfe) uf "$bin/fn_bench_pfe" -P small ;;
    uf-plain) uf "$bin/fn_bench_base" -P small ;;
  esac
}
xp() {
  prog=$1
  shift
  "$bin/xptrace" run -o "$tmp/xp" -c perfetto "$@" -- "$prog" "$n" 2>/dev/null
  rm -rf "$tmp/xp"
}
uf() {
  prog=$1
  shift
  (cd "$tmp" && uftrace record --no-libcall -d "$tmp/uf" "$@" "$prog" "$n" 2>/dev/null)
  rm -rf "$tmp/uf" "$tmp/gmon.out"
}

confs="bare-base bare-pfe bare-cyg floor-rdtsc xp-unselected-pfe xp-cyg xp-pfe xp-plain xp-fentry"
[ $have_pg = 1 ] && confs="$confs xp-pg"
[ $have_uftrace = 1 ] && confs="$confs uf-cyg uf-fentry uf-pfe uf-plain"
for r in $(seq "$reps"); do
  for c in $confs; do
    v=$(run_conf "$c" | tail -1)
    [ -n "$v" ] || { echo "run_functions: $c printed nothing" >&2; continue; }
    echo "$c $v" >>"$tmp/results"
  done
done

python3 - "$tmp/results" "$n" "$reps" <<'PY'
import statistics, sys
vals = {}
for line in open(sys.argv[1]):
    k, v = line.split()
    vals.setdefault(k, []).append(float(v))
med = {k: statistics.median(v) for k, v in vals.items()}
base = med["bare-base"]
def cost(k):
    return med[k] - base if k in med else None
print("Function tracing, ns per call (entry + exit recorded), median of %s x %s calls" % (sys.argv[3], sys.argv[2]))
print("floor: bare -O2 loop %.2f ns/iteration; bare -fpatchable-function-entry=5 %.2f; "
      "bare -finstrument-functions (glibc's empty hooks) %.2f" % (base, med["bare-pfe"], med["bare-cyg"]))
print("floor of entry and exit stamps: two rdtsc per call %.1f ns over bare -O2" % cost("floor-rdtsc"))
print("unselected functions of a patchable build under xptrace: %+.2f ns/call over bare -O2"
      % cost("xp-unselected-pfe"))
print()
print("| way in | xptrace ns/call | uftrace ns/call | xptrace / uftrace |")
print("|---|---:|---:|---:|")
rows = [("-finstrument-functions", "xp-cyg", "uf-cyg"),
        ("-fpatchable-function-entry=5 (uftrace: -P)", "xp-pfe", "uf-pfe"),
        ("-pg -mfentry -mnop-mcount (uftrace: its -pg -mfentry build)", "xp-pg", "uf-fentry"),
        ("-pg -mfentry, calls of __fentry__ (the same binary for both)", "xp-fentry", "uf-fentry"),
        ("unmodified -O2 (uftrace -P)", "xp-plain", "uf-plain")]
for name, x, u in rows:
    cx, cu = cost(x), cost(u)
    fx = "%.1f" % cx if cx is not None else "n/a"
    fu = "%.1f" % cu if cu is not None else "n/a"
    ratio = "%.2f" % (cx / cu) if cx is not None and cu else "n/a"
    print("| %s | %s | %s | %s |" % (name, fx, fu, ratio))
PY
