#!/bin/sh
# Fault tests of issue 8: what survives each way a traced program ends or
# is hurt.  Every run is bounded by `timeout` (a hang is a failure).
#   run_fault.sh CASE XPTRACE WORKLOAD PERFETTO_LIB PROTO CHECKER OUTDIR
set -u
case_name=$1 xptrace=$2 workload=$3 collector=$4 proto=$5 checker=$6 out=$7
pairs=1000
rm -rf "$out"
mkdir -p "$out"
cd "$out" || exit 1
fail() { echo "FAIL [$case_name]: $*"; exit 1; }
check() { python3 "$checker" proto "$proto" "$@" || fail "trace check: $*"; }
no_recording_left() {
  leftover=$(find "$1" -name 'events*.xprec')
  [ -z "$leftover" ] || fail "recording left: $leftover"
}
# Runs the workload under xptrace, perfetto + stats, bounded.
xrun() {
  dir=$1; shift
  timeout -k 5 60 "$xptrace" run -c perfetto,stats -o "$dir" -- "$workload" "$@" >"$dir.out" 2>"$dir.err"
}
# Runs the workload with the collector only (no xptrace), bounded.
direct() {
  dir=$1; shift
  timeout -k 5 60 env XPTI_TRACE_ENABLE=1 XPTI_SUBSCRIBERS="$collector" XPTRACE_OUTPUT="$PWD/$dir" \
      "$workload" "$@" >"$dir.out" 2>"$dir.err"
}

case $case_name in
endings)
  # Every event recorded before the end is in the trace, however it ends.
  for e in exit:0 _exit:0 kill:137 abort:134 segv:139; do
    mode=${e%%:*} want=${e#*:}
    xrun "x$mode" "$mode"
    rc=$?
    [ "$rc" = "$want" ] || fail "$mode under xptrace: exit $rc, expected $want: $(cat "x$mode.err")"
    check "x$mode/trace.perfetto-trace" --slices $pairs --name work=$pairs
    no_recording_left "x$mode"
    # Without xptrace: exit writes the trace itself; the others leave the
    # recording for `xptrace finish`.
    direct "d$mode" "$mode"
    rc=$?
    [ "$rc" = "$want" ] || fail "$mode direct: exit $rc, expected $want"
    if [ "$mode" = exit ]; then
      [ -s "d$mode/trace.perfetto-trace" ] || fail "exit: no trace written at exit"
    else
      [ ! -e "d$mode/trace.perfetto-trace" ] || fail "$mode: a trace appeared by itself"
      "$xptrace" finish "d$mode" 2>"d$mode.finish" || fail "$mode: xptrace finish: $(cat "d$mode.finish")"
    fi
    check "d$mode/trace.perfetto-trace" --slices $pairs --name work=$pairs
    no_recording_left "d$mode"
  done
  ;;
exec)
  # The exec'd image makes a recording of its own; both become traces.
  xrun e exec
  [ $? = 0 ] || fail "exit: $(cat e.err)"
  # same program, same pid: one process folder holds both; the run's
  # trace has both images
  check e/fault_workload-*/trace.perfetto-trace --slices $pairs --name work=$pairs
  check e/fault_workload-*/trace.1.perfetto-trace --slices $pairs --name work=$pairs
  check e/trace.perfetto-trace --slices $((2 * pairs)) --processes 1
  no_recording_left e
  ;;
closefds)
  # The program closes every descriptor and opens files of its own: they
  # are never written by the recorder, and the chunks it could not copy
  # out stay in the recording.
  mkdir cf && (cd cf && timeout -k 5 60 "$xptrace" run -c perfetto -o out -- "$workload" closefds \
      >../cf.out 2>../cf.err)
  [ $? = 0 ] || fail "exit: $(cat cf.err)"
  for i in 0 1 2 3 4 5 6 7; do
    [ "$(cat cf/own-$i)" = mine ] || fail "the program's file own-$i was written into"
  done
  check cf/out/trace.perfetto-trace --slices $((pairs + 20000))
  ;;
orphan)
  # A child still running when xptrace is done: its recording is left
  # alone and said so; `xptrace finish` writes its trace once it ended.
  xrun o orphan
  [ $? = 0 ] || fail "exit: $(cat o.err)"
  check o/trace.perfetto-trace --slices $pairs
  grep -q "is still running; when it ends: xptrace finish" o.err || fail "the running child is not said: $(cat o.err)"
  tries=0
  while :; do # the child ends about 2 s after its parent
    sleep 1
    "$xptrace" finish o 2>o.finish || fail "finish: $(cat o.finish)"
    grep -q "still running" o.finish || break
    tries=$((tries + 1))
    [ $tries -lt 20 ] || fail "the child never ended: $(cat o.finish)"
  done
  for d in o/fault_workload-*; do # the parent's folder and the child's
    check "$d/trace.perfetto-trace" --slices $pairs
  done
  [ "$(ls -d o/fault_workload-* | wc -l)" = 2 ] || fail "not two process folders: $(ls o)"
  no_recording_left o
  ;;
fork-open)
  # A fork inside an open slice: the slice is the parent's; the child's end
  # of it is not recorded and is not a drop (it was counted as one).
  xrun fo fork-open
  [ $? = 0 ] || fail "exit: $(cat fo.err)"
  ! grep -Eq "dropped [1-9]|unmatched ends [1-9]|unclosed begins [1-9]" fo.err ||
    fail "a drop or an unpaired half reported: $(cat fo.err)"
  check fo/trace.perfetto-trace --slices $((pairs + 1))
  [ "$(ls -d fo/fault_workload-* | wc -l)" = 2 ] || fail "not two process folders: $(ls fo)"
  counts=$(for d in fo/fault_workload-*; do grep ",work," "$d/stats.csv" | cut -d, -f5; done |
           sort -n | tr '\n' ' ')
  [ "$counts" = "1 $pairs " ] || fail "work counted $counts, expected 1 (parent) and $pairs (child)"
  no_recording_left fo
  ;;
sigint-term)
  # SIGINT ignored, then SIGTERM: both halves are in the trace.
  xrun st sigint-term
  rc=$?
  [ "$rc" = 143 ] || fail "exit $rc, expected 143: $(cat st.err)"
  check st/trace.perfetto-trace --slices $((2 * pairs))
  ;;
malloc-term)
  # SIGTERM while the program is inside malloc, 20 times: never a hang.
  i=0
  while [ $i -lt 20 ]; do
    i=$((i + 1))
    timeout -k 5 30 "$xptrace" run -c perfetto,stats -o "m$i" -- "$workload" malloc-loop \
        >"m$i.out" 2>"m$i.err" &
    xp=$!
    # Once the program records (its recording exists), 0.1-0.4 s more.
    waited=0
    while ! ls m$i/*/events.xprec >/dev/null 2>&1 && [ $waited -lt 200 ]; do
      sleep 0.05
      waited=$((waited + 1))
    done
    sleep 0.$((i * 7 % 4 + 1))
    kill -TERM $xp
    wait $xp
    rc=$?
    [ "$rc" = 143 ] || fail "try $i: exit $rc, expected 143 (124 is a hang): $(cat "m$i.err")"
    # The full protobuf check (protoc) on a few tries; the others read the
    # trace with the project's own reader (xptrace report), which fails on
    # a trace it cannot read, and want no end without its begin.
    case $i in
    1 | 10 | 20) check "m$i/trace.perfetto-trace" --allow-unmatched ;;
    *)
      "$xptrace" report "m$i/trace.perfetto-trace" >"m$i.report" 2>&1 ||
        fail "try $i: the trace does not read: $(cat "m$i.report")"
      grep -q "ends without a begin 0," "m$i.report" || fail "try $i: $(tail -n 3 "m$i.report")"
      ;;
    esac
    no_recording_left "m$i"
  done
  ;;
caller-events)
  # Events the caller owns (stack; heap freed and scribbled after each
  # notify) are recorded by value.
  xrun c caller-events
  rc=$?
  [ "$rc" = 0 ] || fail "exit $rc: $(cat c.err)"
  check c/trace.perfetto-trace --slices $((2 * pairs)) --name stack_event=$pairs --name heap_event=$pairs
  ;;
signal-notify|signal-names)
  # Notifications from a signal handler while the program mallocs.
  # signal-names: each tick a pair with a new name, so the collectors'
  # tables grow in the handler, never through malloc (a calloc
  # interrupted by the handler deadlocked).
  xrun s "$case_name"
  rc=$?
  [ "$rc" = 0 ] || fail "exit $rc: $(cat s.err)"
  # A tick that lands while its thread is recording is dropped and
  # counted (it would write over the record being made): recorded +
  # dropped is exact.
  ticks=$(sed -n 's/^ticks \([0-9]*\) .*/\1/p' s.out)
  n=$(sed -n 's/^ticks [0-9]* pairs \([0-9]*\)/\1/p' s.out)
  [ -n "$ticks" ] && [ "$ticks" -ge 500 ] || fail "too few ticks in 20 s: $(cat s.out)"
  per_tick=1
  [ "$case_name" = signal-names ] && per_tick=2
  check s/trace.perfetto-trace --name work="$n" --total $((2 * n + per_tick * ticks))
  if [ "$case_name" = signal-names ]; then
    # Every tick's pair is in the statistics too, or counted as dropped.
    csv=$(ls s/fault_workload-*/stats.csv)
    sig=$(awk -F, '$3 ~ /^sig[0-9]+$/ && $4 == "span" { c += $5 } END { print c + 0 }' "$csv")
    dropped=$(sed -n 's/.*, dropped \([0-9]*\)$/\1/p' s.err)
    [ "$sig" -le "$ticks" ] && [ "$((sig + ${dropped:-0}))" -ge "$ticks" ] ||
      fail "stats: $sig sig pairs, ${dropped:-?} dropped, $ticks ticks"
  fi
  ;;
atexit)
  # Events from an atexit handler registered before tracing started, and
  # from a destructor: all of them under xptrace (it finishes after the
  # program), the atexit ones when the program finishes its own trace.
  xrun a atexit
  [ $? = 0 ] || fail "exit: $(cat a.err)"
  check a/trace.perfetto-trace --name work=1 --name late=$pairs --name dtor=$pairs
  direct d atexit
  [ $? = 0 ] || fail "direct exit: $(cat d.err)"
  check d/trace.perfetto-trace --name work=1 --name late=$pairs
  ;;
ring-fair)
  # 16 threads in a 256K ring: every thread keeps its newest events.
  timeout -k 5 60 "$xptrace" run -c perfetto -o r --buffer-policy ring --buffer-size 256K -- \
      "$workload" threads 16 >r.out 2>r.err || fail "run: $(cat r.err)"
  python3 "$checker" proto "$proto" r/trace.perfetto-trace --total $((16 * 2 * pairs)) \
      --threads 16 || fail "ring: not every thread kept: $(cat r.err)"
  ;;
churn)
  # Many short threads: per-thread state is reused, memory stays bounded.
  # 6,000 prove it (~10 KiB a thread when it was not: 60 MB over the
  # bound); 20,000 took 300 s on a loaded machine.
  n=${XPT_CHURN_THREADS:-6000}
  base=$(env XPTI_TRACE_ENABLE=0 "$workload" churn "$n" | sed -n 's/^maxrss_kib //p')
  xrun ch churn "$n"
  [ $? = 0 ] || fail "exit: $(cat ch.err)"
  rss=$(sed -n 's/^maxrss_kib //p' ch.out)
  echo "churn: $n threads, peak RSS ${rss} KiB traced, ${base} KiB untraced"
  [ "$rss" -lt $((base + 32768)) ] || fail "peak RSS $rss KiB, untraced $base KiB: not bounded"
  # One track per thread id: the kernel hands ids out again (pid_max is
  # 32768 on small machines, and other tests fork meanwhile).
  tids=$(sed -n 's/^distinct_tids //p' ch.out)
  check ch/trace.perfetto-trace --slices "$n" --threads "$tids"
  ;;
reserve)
  # While it runs (and until the launcher finishes it), a process holds
  # an eighth of its trace buffer on disk, not all of it: a run of many
  # short processes (make, sh) does not fill the disk with reservations.
  timeout -k 5 60 "$xptrace" run -c perfetto -o rs -- sh -c \
    "for i in 1 2 3; do '$workload' threads 2 100 >/dev/null; done; stat -c '%b %B %s' rs/*/events.xprec" \
    >rs.out 2>rs.err
  [ $? = 0 ] || fail "exit: $(cat rs.err)"
  n=0
  while read -r blocks bsize size; do
    n=$((n + 1))
    held=$((blocks * bsize))
    echo "recording $n: $held bytes on disk of $size"
    [ "$held" -le $((size / 8 + 1048576)) ] || fail "a recording holds $held of its $size bytes"
  done <rs.out
  [ "$n" = 3 ] || fail "expected 3 recordings, found $n: $(cat rs.out)"
  for t in rs/fault_workload-*/trace.perfetto-trace; do check "$t" --slices 200; done
  no_recording_left rs
  ;;
disk-full)
  # A full file system: events that cannot be recorded are counted, the
  # trace is complete or absent (never cut), and what went wrong is said.
  if [ "$(id -u)" != 0 ]; then echo "SKIP: needs root to mount a small tmpfs"; exit 0; fi
  mkdir -p small
  mount -t tmpfs -o size=1m tmpfs small 2>/dev/null || { echo "SKIP: cannot mount tmpfs"; exit 0; }
  trap 'umount "$PWD/small"' EXIT
  timeout -k 5 60 "$xptrace" run -c perfetto -o small/out -- "$workload" threads 8 8000 >f.out 2>f.err
  rc=$?
  [ "$rc" = 0 ] || fail "exit $rc: $(cat f.err)"
  cat f.err
  trace=$(ls small/out/*/trace.perfetto-trace 2>/dev/null | head -n 1) # the process's own
  if [ -n "$trace" ]; then
    python3 "$checker" proto "$proto" "$trace" --total $((8 * 2 * 8000)) \
        --min-dropped 1 || fail "trace cut or drops not counted"
    grep -q "dropped [0-9]* events (the disk was full)" f.err || fail "the full disk is not said"
  elif grep -q "cannot write the trace.*the recording is kept" f.err; then
    ls small/out/*/events*.xprec >/dev/null 2>&1 || fail "the recording was not kept"
  else
    fail "no trace and no reason"
  fi
  ;;
*)
  fail "unknown case"
  ;;
esac
echo PASS
