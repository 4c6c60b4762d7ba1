#!/bin/bash
# All of bench/ in one go, as Markdown: the numbers of bench/README.md.
#
#   bench/run_all.sh [BUILD_DIR] [--peers]          (default BUILD_DIR: ./build)
#
# run_test -y performance runs REPEAT times (default 5) with
# TRACE_POINTS (default 10000) trace points, 10 visits each, on THREADS
# (default 0,1,2); every cost is the median over the runs, next to its
# floor ratio and the PERF.md target.  Then the proxy stub is timed
# against a direct call, callgrind counts instructions, and with --peers
# bench/peers/run_peers.sh runs too (root; installs LTTng if missing).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=build
peers=
for arg in "$@"; do
  case $arg in
    --peers) peers=1 ;;
    *) build=$arg ;;
  esac
done
bin=$build/bin
repeat=${REPEAT:-5}
points=${TRACE_POINTS:-10000}
threads=${THREADS:-0,1,2}
for program in run_test cg_bench_fw cg_bench_proxy; do
  [ -x "$bin/$program" ] || { echo "xptrace: $bin/$program is missing: build first" >&2; exit 1; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "## Results"
echo
echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "- machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) CPUs, kernel $(uname -r)"
echo "- commit: $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo "- run_test -y performance -t $points -i 1,2 -n $threads -f 10 -r, $repeat runs: medians"
echo

for _ in $(seq "$repeat"); do
  "$bin/run_test" -y performance -t "$points" -i 1,2 -n "$threads" -f 10 -r | grep '^report,' >>"$work/reports.csv"
done

# Medians per (test, threads, metric): value and ratio to the floor.
awk -F, '
  function median(list,    n, v, i, j, t) {
    n = split(list, v, " ")
    for (i = 2; i <= n; i++) { t = v[i] + 0; for (j = i - 1; j >= 1 && v[j] + 0 > t; j--) v[j + 1] = v[j]; v[j + 1] = t }
    return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
  }
  { k = $2 SUBSEP $3 SUBSEP $4; values[k] = values[k] " " $5; ratios[k] = ratios[k] " " $7; floor[k] = $6
    if (!(k in seen)) { seen[k] = 1; order[++count] = k } }
  END { for (i = 1; i <= count; i++) { k = order[i]; split(k, part, SUBSEP)
          printf "%s %s %s %s %.4f %.4f\n", part[1], part[2], part[3], (floor[k] == "" ? "-" : floor[k]), median(values[k]), median(ratios[k]) } }
' "$work/reports.csv" >"$work/medians.txt"

IFS=, read -r -a thread_list <<<"$threads"
label() { [ "$1" = 0 ] && echo serial || echo "$1 thr"; }
value() { awk -v t="$1" -v n="$2" -v k="$3" -v c="$4" '$1 == t && $2 == n && $3 == k { print $c }' "$work/medians.txt"; }

targets() { # key -> target text
  case $1 in
    string-insert) echo "<= 80 ns" ;;
    string-lookup) echo "<= 10 ns" ;;
    tp-create-new) echo "<= 200 ns" ;;
    tp-create-existing) echo "<= 40 ns" ;;
    tp-find-uid) echo "<= 10 ns" ;;
    notify) echo "<= 3 ns, <= 2.5x dso-call" ;;
    notify-pair) echo "<= 6 ns" ;;
    fw-cost) echo "<= 8 ns" ;;
    events-per-second-ct10) echo ">= 500000" ;;
    *) echo "" ;;
  esac
}

table() { # TEST KEYS...
  local test=$1
  shift
  printf '| %s | floor |' "operation ($test)"
  for n in "${thread_list[@]}"; do printf ' %s ns | x floor |' "$(label "$n")"; done
  printf ' target |\n|---|---|'
  for _ in "${thread_list[@]}"; do printf -- '---:|---:|'; done
  printf -- '---|\n'
  for key in "$@"; do
    printf '| %s | %s |' "$key" "$(value "$test" "${thread_list[0]}" "$key" 4)"
    for n in "${thread_list[@]}"; do
      printf ' %s | %s |' "$(value "$test" "$n" "$key" 5 | awk '{ printf "%.2f", $1 }')" \
        "$(value "$test" "$n" "$key" 6 | awk '{ printf "%.1f", $1 }')"
    done
    printf ' %s |\n' "$(targets "$key")"
  done
  echo
}

echo "### Floors (ns, median)"
echo
echo "| floor | ns |"
echo "|---|---:|"
for tag in loop call dso-call atomic clock rdtsc record; do
  echo "| $tag | $(value performance-1 0 "$tag" 5 | awk '{ printf "%.2f", $1 }') |"
done
echo
echo "### run_test performance test 1 (data structures)"
echo
table performance-1 string-insert string-lookup string-insert-2-lookups tp-create-new \
  tp-create-existing tp-find-uid tp-local-cache notify notify-pair
echo "### run_test performance test 2 (framework cost; events/s at 1% overhead)"
echo
table performance-2 tp-lookup-notify tp-create fw-cost
echo "| events/s at callback cost |$(for n in "${thread_list[@]}"; do printf ' %s |' "$(label "$n")"; done) target |"
printf '|---|'; for _ in "${thread_list[@]}"; do printf -- '---:|'; done; printf -- '---|\n'
for ct in 10 100 500 1000 2000; do
  printf '| Ct = %s ns |' "$ct"
  for n in "${thread_list[@]}"; do
    printf ' %s |' "$(value performance-2 "$n" "events-per-second-ct$ct" 5 | awk '{ printf "%.0f", $1 }')"
  done
  printf ' %s |\n' "$(targets "events-per-second-ct$ct")"
done
echo

# 2 threads against 1: the per-operation cost may rise by 20% at most.
if printf '%s\n' "${thread_list[@]}" | grep -qx 1 && printf '%s\n' "${thread_list[@]}" | grep -qx 2; then
  echo "### 2 threads against 1 (target: cost rises <= 20%)"
  echo
  echo "| operation | 1 thread ns | 2 threads ns | change |"
  echo "|---|---:|---:|---:|"
  for key in notify tp-find-uid tp-create-existing string-lookup; do
    one=$(value performance-1 1 "$key" 5)
    two=$(value performance-1 2 "$key" 5)
    awk -v k="$key" -v a="$one" -v b="$two" 'BEGIN { printf "| %s | %.2f | %.2f | %+.0f%% |\n", k, a, b, (b / a - 1) * 100 }'
  done
  echo
fi

echo "### Proxy stub with tracing off, timed (ns per loop iteration, median of 5)"
echo
direct=$("$bin/cg_bench_proxy" direct-call 20000000 time | awk '{ print $2 }')
stub=$("$bin/cg_bench_proxy" notify 20000000 time | awk '{ print $2 }')
enabled=$(env -u XPTI_FRAMEWORK_DISPATCHER "$bin/cg_bench_proxy" trace-enabled 20000000 time | awk '{ print $2 }')
echo "| call | ns | x direct call | target |"
echo "|---|---:|---:|---|"
echo "| direct call, empty function | $direct | 1.00 | |"
awk -v s="$stub" -v d="$direct" 'BEGIN { printf "| xptiNotifySubscribers stub | %s | %.2f | <= 1.5x |\n", s, s / d }'
awk -v s="$enabled" -v d="$direct" 'BEGIN { printf "| xptiTraceEnabled stub | %s | %.2f | <= 1.5x |\n", s, s / d }'
echo

if command -v valgrind >/dev/null 2>&1; then
  echo "### Instructions per call (callgrind)"
  echo
  echo '```'
  "$here/callgrind/run_callgrind.sh" "$build"
  echo '```'
  echo
fi

if [ -n "$peers" ]; then
  echo "### Peers"
  echo
  echo '```'
  "$here/peers/run_peers.sh" "$build" 2>&1
  echo '```'
fi
