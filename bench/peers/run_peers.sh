#!/bin/bash
# Peers side by side: the same begin/end shape through LTTng-UST (no
# session; a session recording to a ring buffer) and through xptrace (off;
# an empty subscriber; the Perfetto trace collector), one table with ns per
# event and ratios to floors measured in the same run.
#
#   bench/peers/run_peers.sh [BUILD_DIR]
#
# Without BUILD_DIR, xptrace is configured and built in a temporary
# folder.  Installs what is missing (as root, Debian: apt-get), starts its
# own lttng-sessiond and stops it at the end, removes every file it made.
# Environment: ITERATIONS (begin/end pairs per repetition, default 200000),
# REPETITIONS (default 5; the median is printed).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source_dir=$(cd "$here/../.." && pwd)
iterations=${ITERATIONS:-200000}
repetitions=${REPETITIONS:-5}
session=xptrace-bench-$$
sessiond_pid=
session_created=
work=$(mktemp -d /tmp/xptrace-peers.XXXXXX)

cleanup() {
  set +e
  if [ -n "$session_created" ]; then
    lttng destroy "$session" >/dev/null 2>&1
  fi
  if [ -n "$sessiond_pid" ]; then
    kill "$sessiond_pid" 2>/dev/null
    for _ in $(seq 50); do
      kill -0 "$sessiond_pid" 2>/dev/null || break
      sleep 0.1
    done
  fi
  rm -rf "$work"
}
trap cleanup EXIT

say() { echo "xptrace: peers: $*" >&2; }

# ---- 1. what the benchmark needs -------------------------------------------
need=()
for package in build-essential cmake pkg-config procps liblttng-ust-dev lttng-tools; do
  dpkg -s "$package" >/dev/null 2>&1 || need+=("$package")
done
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    say "missing packages ${need[*]}; run as root or install them"
    exit 1
  fi
  say "installing ${need[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >/dev/null
fi

# ---- 2. xptrace --------------------------------------------------------------
if [ $# -ge 1 ]; then
  build=$(cd "$1" && pwd)
else
  build=$work/build
  say "building xptrace in $build"
  cmake -S "$source_dir" -B "$build" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF >"$work/cmake.log" 2>&1 ||
    { cat "$work/cmake.log" >&2; exit 1; }
  targets="xptifw xpti xpti_bench_empty"
  cmake --build "$build" --target help >"$work/targets.txt" 2>/dev/null || true
  if grep -q 'xpti_perfetto' "$work/targets.txt"; then
    targets="$targets xpti_perfetto"
  fi
  # shellcheck disable=SC2086
  cmake --build "$build" -j2 --target $targets >"$work/build.log" 2>&1 ||
    { cat "$work/build.log" >&2; exit 1; }
fi
lib=$build/lib
for file in libxptifw.so libxpti.a libxpti_bench_empty.so; do
  [ -e "$lib/$file" ] || { say "$lib/$file is missing (build xptrace first)"; exit 1; }
done

# ---- 3. the drivers ------------------------------------------------------------
cflags=(-O2 -g -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -I"$source_dir/include"
        -I"$source_dir/bench/common" -I"$here")
floors_src=$source_dir/bench/common/bench_floors.c
empty_lib=(-L"$lib" -lxpti_bench_empty -Wl,-rpath,"$lib")
gcc "${cflags[@]}" -DPEER_LTTNG -o "$work/peer_lttng" "$here/peer_driver.c" "$here/peer_lttng_tp.c" \
  "$floors_src" "${empty_lib[@]}" -llttng-ust -ldl
gcc "${cflags[@]}" -o "$work/peer_xpti" "$here/peer_driver.c" "$floors_src" "$lib/libxpti.a" \
  "${empty_lib[@]}" -ldl -lpthread
gcc "${cflags[@]}" -shared -fPIC -o "$work/libpeer_empty_subscriber.so" \
  "$here/peer_empty_subscriber.c" -L"$lib" -lxptifw -Wl,-rpath,"$lib"

# run NAME PROGRAM [floors]: the median ns per event, floors kept in $work.
run() {
  local name=$1 program=$2
  shift 2
  "$program" "$iterations" "$repetitions" "$@" >"$work/$name.out"
  awk '/^ns_per_event/ { print $2 }' "$work/$name.out"
}

clean_env=(env -u XPTI_FRAMEWORK_DISPATCHER -u XPTI_SUBSCRIBERS -u XPTI_TRACE_ENABLE
           -u LTTNG_UST_REGISTER_TIMEOUT)

# ---- 4. LTTng-UST ---------------------------------------------------------------
export LTTNG_HOME=$work # a non-root user gets a private session daemon
if pgrep -u "$(id -u)" -x lttng-sessiond >/dev/null; then
  say "a session daemon is already running: using it (it is not stopped at the end)"
  existing_daemon=1
else
  existing_daemon=
fi
if [ -z "$existing_daemon" ]; then
  lttng_off=$("${clean_env[@]}" "$work/peer_lttng" "$iterations" "$repetitions" |
              awk '/^ns_per_event/ { print $2 }')
  lttng-sessiond --daemonize --no-kernel
  sessiond_pid=$(pgrep -n -u "$(id -u)" -x lttng-sessiond)
else
  lttng_off=$("${clean_env[@]}" "$work/peer_lttng" "$iterations" "$repetitions" |
              awk '/^ns_per_event/ { print $2 }')
fi
lttng create "$session" --snapshot --output="$work/lttng-snapshot" >/dev/null
session_created=1
lttng enable-event --session="$session" -u 'xptrace_bench:*' >/dev/null
lttng start "$session" >/dev/null
lttng_on=$("${clean_env[@]}" "$work/peer_lttng" "$iterations" "$repetitions" |
           awk '/^ns_per_event/ { print $2 }')
lttng stop "$session" >/dev/null
lttng snapshot record --session="$session" >/dev/null
lttng_bytes=$(du -sb "$work/lttng-snapshot" 2>/dev/null | awk '{ print $1 }')
lttng destroy "$session" >/dev/null
session_created=
if [ -n "$sessiond_pid" ]; then
  kill "$sessiond_pid"
  for _ in $(seq 50); do
    kill -0 "$sessiond_pid" 2>/dev/null || break
    sleep 0.1
  done
  sessiond_pid=
fi
[ "${lttng_bytes:-0}" -gt 4096 ] || say "warning: the LTTng snapshot holds no events"

# ---- 5. xptrace -------------------------------------------------------------------
xpti_off=$("${clean_env[@]}" "$work/peer_xpti" "$iterations" "$repetitions" floors |
           tee "$work/floors.out" | awk '/^ns_per_event/ { print $2 }')
floor() { awk -v t="$1" '$1 == "floor" && $2 == t { print $3 }' "$work/floors.out"; }
xpti_empty=$("${clean_env[@]}" XPTI_FRAMEWORK_DISPATCHER="$lib/libxptifw.so" \
             XPTI_SUBSCRIBERS="$work/libpeer_empty_subscriber.so" \
             "$work/peer_xpti" "$iterations" "$repetitions" | awk '/^ns_per_event/ { print $2 }')
if [ -e "$lib/libxpti_perfetto.so" ]; then
  xpti_trace=$("${clean_env[@]}" XPTI_FRAMEWORK_DISPATCHER="$lib/libxptifw.so" \
               XPTI_SUBSCRIBERS="$lib/libxpti_perfetto.so" XPTRACE_OUTPUT="$work/xptrace-out" \
               "$work/peer_xpti" "$iterations" "$repetitions" | awk '/^ns_per_event/ { print $2 }')
  trace_bytes=$(find "$work/xptrace-out" -name '*.perfetto-trace' -printf '%s\n' 2>/dev/null |
                awk '{ s += $1 } END { print s + 0 }')
  [ "$trace_bytes" -gt 0 ] || say "warning: the Perfetto collector wrote no trace"
else
  say "libxpti_perfetto.so is absent: no xptrace recording row (empty subscriber only)"
  xpti_trace=
fi

# ---- 6. the table -----------------------------------------------------------------
record=$(floor record)
printf '\nPeers: begin/end pairs, ns per event (a begin or an end), median of %s x %s pairs\n' \
  "$repetitions" "$iterations"
printf 'Floors in this run: empty loop %s ns, atomic load+branch %s ns, call into .so %s ns,\n' \
  "$(floor loop)" "$(floor atomic)" "$(floor dso-call)"
printf '  rdtsc %s ns, clock_gettime %s ns, TLS 32-byte record + timestamp %s ns\n' \
  "$(floor rdtsc)" "$(floor clock)" "$record"
printf '%-44s %10s %12s %12s\n' "tracer, state" "ns/event" "x record" "x LTTng on"
row() {
  [ -n "$2" ] || return 0
  awk -v label="$1" -v ns="$2" -v rec="$record" -v lt="$lttng_on" \
    'BEGIN { printf "%-44s %10.2f %11.2fx %11.3fx\n", label, ns, ns / rec, ns / lt }'
}
row "LTTng-UST tracepoint, no session" "$lttng_off"
row "LTTng-UST tracepoint, snapshot session" "$lttng_on"
row "xptrace proxy, no dispatcher (off)" "$xpti_off"
row "xptrace, dispatcher + empty subscriber" "$xpti_empty"
row "xptrace, dispatcher + Perfetto collector" "$xpti_trace"
echo "(LTTng snapshot: ${lttng_bytes:-0} bytes; xptrace trace: ${trace_bytes:-0} bytes;" \
     "all removed)"
