#!/bin/sh
# Merge benchmark (bench/merge/README.md): P processes x E events each
# (4 threads per process), merged by `xptrace merge`; prints wall time,
# peak RSS, input size, and the floor of the same run: `cat` of the same
# inputs into a file (read + write of every byte, no decoding).
#   run_bench.sh BUILD_DIR [SCRATCH] [REPS]
set -eu
build=$(cd "$1" && pwd)
scratch=${2:-/tmp/xptrace-merge-bench}
reps=${3:-3}
xptrace=$build/bin/xptrace gen=$build/bin/gen_trace
rm -rf "$scratch"
mkdir -p "$scratch"
cd "$scratch"
# peak RSS (KiB) and wall seconds of a command
measure() {
  python3 -c 'import resource, subprocess, sys, time
t = time.monotonic()
rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode
dt = time.monotonic() - t
if rc: sys.exit("failed: %s" % sys.argv[1:])
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
print("%.3f %d %.3f" % (dt, ru.ru_maxrss, ru.ru_utime + ru.ru_stime))' "$@"
}
median() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
printf '%-6s %-9s %-9s %-8s %-8s %-8s %-8s %-9s %s\n' procs events/p input_MB merge_s cpu_s cat_s ratio MB/s peakRSS_KiB
specs=${BENCH_SPECS:-1:1000000 4:1000000 16:1000000 16:250000 16:62500}
for spec in $specs; do
  procs=${spec%%:*} events=${spec#*:}
  rm -rf in && mkdir in
  i=0
  while [ "$i" -lt "$procs" ]; do
    mkdir "in/p$i"
    "$gen" "in/p$i/trace.perfetto-trace" $((10000 + i)) 4 $((events / 4)) 10
    i=$((i + 1))
  done
  bytes=$(cat in/p*/trace.perfetto-trace | wc -c)
  : >m.times
  : >c.times
  : >u.times
  rss=0
  r=0
  while [ "$r" -lt "$reps" ]; do
    rm -f out.perfetto-trace cat.out
    set -- $(measure "$xptrace" merge -q -o out.perfetto-trace in)
    echo "$1" >>m.times
    echo "$3" >>u.times
    [ "$2" -gt "$rss" ] && rss=$2
    set -- $(measure sh -c 'cat in/p*/trace.perfetto-trace >cat.out')
    echo "$1" >>c.times
    r=$((r + 1))
  done
  m=$(median <m.times) c=$(median <c.times) u=$(median <u.times)
  awk -v p="$procs" -v e="$events" -v b="$bytes" -v m="$m" -v c="$c" -v r="$rss" -v u="$u" 'BEGIN {
    printf "%-6d %-9d %-9.1f %-8.3f %-8.3f %-8.3f %-8.1f %-9.0f %d\n", p, e, b / 1e6, m, u, c, m / c, b / 1e6 / m, r }'
  rm -rf in out.perfetto-trace cat.out
done
