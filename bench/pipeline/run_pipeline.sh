#!/bin/sh
# The whole pipeline on programs of real size (issue 24's targets), one
# Markdown table of this machine's numbers, every peer in the same run:
#   bench/pipeline/run_pipeline.sh [BUILD_DIR] [SCRATCH]
# Rows: an MPI ring of 2 ranks x 100,000 rounds and Debian's clpeak
# (every call in the trace, drops), `xptrace finish` of a >= 2 GB
# recording and `xptrace merge` of 256 traces of 100,000 events (peak
# memory, MB/s), and `xptrace run --functions` next to `uftrace record`
# (+ `uftrace report`) on the same -finstrument-functions binary.
# Needs: the build (tests included), mpirun, clpeak, uftrace, gcc;
# rows whose tool is missing say so.  Several GB of disk in SCRATCH.
set -u
build=$(cd "${1:-build}" && pwd)
scratch=${2:-/tmp/xptrace-pipeline-bench}
bin=$build/bin
xptrace=$bin/xptrace
rm -rf "$scratch"
mkdir -p "$scratch"
cd "$scratch" || exit 1
# measure CMD...: "wall_s peak_rss_KiB cpu_s" of the command (output dropped)
measure() {
  python3 -c 'import resource, subprocess, sys, time
t = time.monotonic()
rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=open("last.err", "w")).returncode
dt = time.monotonic() - t
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
print("%.3f %d %.3f %d" % (dt, ru.ru_maxrss, ru.ru_utime + ru.ru_stime, rc))' "$@"
}
count() { # count REPORT_JSON NAME: the trace's slices of that name
  python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
print(sum(x["count"] for x in r["points"]["rows"] if x["name"] == sys.argv[2]))' "$1" "$2"
}
dropped() { grep -o "dropped [0-9]* events" "$1" | awk '{s += $2} END {print s + 0}'; }

echo "## Pipeline ($(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, commit $(git -C "$build/.." rev-parse --short HEAD 2>/dev/null || echo ?))"
echo
echo "| row | measured | target |"
echo "|---|---|---|"

# MPI ring, 2 ranks x 100,000 rounds, the launcher outside mpirun.
if command -v mpirun >/dev/null && [ -x "$bin/mpi_app" ]; then
  set -- $(measure "$xptrace" run --mpi -o mpi -- mpirun --allow-run-as-root --oversubscribe -np 2 \
    "$bin/mpi_app" ring 100000)
  cp last.err mpi.err
  "$xptrace" report --format json --top 0 mpi/trace.perfetto-trace >mpi.json 2>/dev/null
  echo "| MPI ring 2 x 100,000 | MPI_Send $(count mpi.json MPI_Send), MPI_Recv $(count mpi.json MPI_Recv) of 200,000 each; dropped $(dropped mpi.err); $1 s wall | every call, 0 dropped |"
else
  echo "| MPI ring | not run (mpirun or mpi_app missing) | |"
fi

# Debian's clpeak: every launch with its device slice.
if command -v clpeak >/dev/null; then
  set -- $(measure "$xptrace" run --opencl -o cl -- clpeak --kernel-latency --use-event-timer)
  cp last.err cl.err
  "$xptrace" report --format json --top 0 cl/trace.perfetto-trace >cl.json 2>/dev/null
  dev=$(python3 -c 'import json, sys; print(sum(r["count"] for r in json.load(open(sys.argv[1]))["devices"]["rows"]))' cl.json)
  echo "| clpeak --kernel-latency | launches $(count cl.json clEnqueueNDRangeKernel), device slices $dev; dropped $(dropped cl.err); $1 s wall | every launch with its device slice, 0 dropped |"
else
  echo "| clpeak | not run (apt-get install clpeak) | |"
fi

# finish of a >= 2 GB recording (2 threads x 20M slices), left for the
# launcher and finished by `xptrace finish`.
mkdir rec
XPTI_TRACE_ENABLE=1 XPTI_FRAMEWORK_DISPATCHER="$build/lib/libxptifw.so" \
  XPTI_SUBSCRIBERS="$build/lib/libxpti_perfetto.so" XPTRACE_FINISHER=launcher \
  XPTRACE_OUTPUT="$PWD/rec" "$bin/pt_workload" threads 2 20000000 >/dev/null 2>&1
bytes=$(cat rec/events*.xprec* | wc -c)
set -- $(measure "$xptrace" finish rec)
mbs=$(awk -v b="$bytes" -v s="$1" 'BEGIN {printf "%.0f", b / 1e6 / s}')
echo "| finish of $((bytes / 1000000)) MB of recording | $1 s ($mbs MB/s), peak RSS $(($2 / 1024)) MiB | <= 256 MiB, >= 200 MB/s |"
rm -rf rec

# merge of 256 process traces of 100,000 events each.
mkdir in
i=0
while [ $i -lt 256 ]; do
  "$bin/gen_trace" "in/p$i.perfetto-trace" $((2000 + i)) 4 100000 10 >/dev/null || break
  i=$((i + 1))
done
bytes=$(cat in/*.perfetto-trace | wc -c)
set -- $(measure "$xptrace" merge -o merged.perfetto-trace in)
echo "| merge of 256 x 100,000 events ($((bytes / 1000000)) MB) | $1 s, peak RSS $(($2 / 1024)) MiB | <= 256 MiB, linear in events |"
rm -rf in merged.perfetto-trace

# Function tracing, the whole command, next to uftrace on the same binary.
if command -v uftrace >/dev/null && command -v gcc >/dev/null; then
  printf '#include <stdio.h>\n#include <stdlib.h>\nstatic int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }\nint main(int c, char **v) { int n = c > 1 ? atoi(v[1]) : 29; printf("%%d\\n", fib(n)); return 0; }\n' >fib.c
  gcc -O2 -finstrument-functions -o fib fib.c
  best() { # best CPU seconds of 5 runs of a shell command
    for _ in 1 2 3 4 5; do
      python3 -c 'import resource, subprocess, sys
subprocess.run(sys.argv[1], shell=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
ru = resource.getrusage(resource.RUSAGE_CHILDREN); print("%.3f" % (ru.ru_utime + ru.ru_stime))' "$1"
    done | sort -n | head -n 1
  }
  xp=$(best "rm -rf f1; $xptrace run --functions -o f1 -- ./fib 29")
  xpp=$(best "rm -rf f2; $xptrace run -c perfetto --functions -o f2 -- ./fib 29")
  ur=$(best "rm -rf u1; uftrace record -d u1 ./fib 29")
  urr=$(best "rm -rf u2; uftrace record -d u2 ./fib 29 && uftrace report -d u2")
  r1=$(awk -v a="$xp" -v b="$urr" 'BEGIN {printf "%.2f", a / b}')
  r2=$(awk -v a="$xpp" -v b="$ur" 'BEGIN {printf "%.2f", a / b}')
  echo "| run --functions, fib(29) (1.66M calls) | ${xp} s CPU = ${r1}x uftrace record + report (${urr} s) | <= 1.0x |"
  echo "| run -c perfetto --functions | ${xpp} s CPU = ${r2}x uftrace record (${ur} s) | <= 0.7x |"
else
  echo "| function tracing | not run (uftrace or gcc missing) | |"
fi
cd / && rm -rf "$scratch"
