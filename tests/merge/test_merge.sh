#!/bin/sh
# Tests of per-process output and `xptrace merge` (issue 11 items 1, 2, 4).
# usage: test_merge.sh MODE XPTRACE WORKLOAD PROTO CHECKER DUMP GEN SANITIZE SCRATCH
#   MODE: script | runs | shared | bad | memory | finish-memory | processes
#   WORKLOAD: tests/perfetto's pt_workload; DUMP: pt_read_dump; GEN: gen_trace
#   SANITIZE: the build's XPTRACE_SANITIZE ("" for none)
set -u
mode=$1 xptrace=$2 w=$3 proto=$4 checker=$5 dump=$6 gen=$7 sanitize=$8 scratch=$9
rm -rf "$scratch"
mkdir -p "$scratch"
cd "$scratch" || exit 1
failures=0
fail() {
  echo "FAIL [$mode]: $*" >&2
  failures=$((failures + 1))
}
check() { python3 "$checker" proto "$proto" "$@" >check.out 2>&1 || fail "check_trace $*: $(cat check.out)"; }
# field NAME FILE: a count of check_trace's summary line (slices=, flows=...)
field() { sed -n "s/^check_trace: slices=.* $1=\([0-9]*\).*/\1/p; s/^check_trace: $1=\([0-9]*\) .*/\1/p" "$2" | head -n 1; }
# sum NAME TRACE...: that count summed over the traces, each checked alone
sum() {
  name=$1
  shift
  total=0
  for t in "$@"; do
    python3 "$checker" proto "$proto" "$t" >one.out 2>&1 || fail "check_trace $t: $(cat one.out)"
    total=$((total + $(field "$name" one.out)))
  done
  echo "$total"
}

case $mode in
script)
  # A shell script running three traced programs, one of which forks:
  # four processes, four folders, one merged trace.
  "$xptrace" run -o run -- sh -c "'$w' basic && '$w' threads 3 50 && '$w' fork" >run.out 2>run.err
  [ $? = 0 ] || fail "run: $(cat run.err)"
  n=$(ls -d run/pt_workload-*/ | wc -l)
  [ "$n" = 4 ] || fail "expected 4 process folders, found $n: $(ls run)"
  for d in run/pt_workload-*/; do
    [ -s "$d/trace.perfetto-trace" ] || fail "$d: no trace"
    [ -s "$d/xptrace.session" ] || fail "$d: no session mark"
  done
  [ ! -e run/child-* ] 2>/dev/null || fail "a child folder inside: $(ls run)"
  grep -qxF "xptrace: one trace of 4 processes" run.err || fail "no merge line: $(cat run.err)"
  grep -qxF "xptrace: trace $PWD/run/trace.perfetto-trace (open in https://ui.perfetto.dev)" run.err ||
    fail "merged trace not named: $(cat run.err)"
  [ "$(grep -c '^xptrace: trace ' run.err)" = 1 ] || fail "more than one trace line: $(cat run.err)"
  slices=$(sum slices run/pt_workload-*/trace.perfetto-trace)
  flows=$(sum flows run/pt_workload-*/trace.perfetto-trace)
  threads=$(sum threads run/pt_workload-*/trace.perfetto-trace)
  [ "$slices" -gt 0 ] || fail "no slices in the process traces"
  check run/trace.perfetto-trace --processes 4 --process-name pt_workload=4 --slices "$slices" \
    --flows "$flows" --threads "$threads" --cross-flows 0
  # the reader sees what the checker sees
  "$dump" run/trace.perfetto-trace >dump.out 2>&1 || fail "reader: $(cat dump.out)"
  grep -q " begins=$slices ends=$slices " dump.out || fail "reader counts $(cat dump.out), checker $slices slices"
  grep -q " processes=4 " dump.out || fail "reader: not 4 process tracks: $(cat dump.out)"
  ;;
runs)
  # Two runs' folders merged; a run merged with a copy of itself (every
  # pid taken twice: moved, never joined).
  "$xptrace" run -o r1 -- "$w" basic >r1.out 2>r1.err || fail "run 1: $(cat r1.err)"
  "$xptrace" run -o r2 -- "$w" fork >r2.out 2>r2.err || fail "run 2: $(cat r2.err)"
  "$xptrace" merge -o both.perfetto-trace r1 r2 >m.out 2>m.err
  [ $? = 0 ] || fail "merge: $(cat m.err)"
  grep -qF "xptrace: merged 3 traces (3 processes, " m.err || fail "summary: $(cat m.err)"
  slices=$(sum slices r1/pt_workload-*/trace.perfetto-trace r2/pt_workload-*/trace.perfetto-trace)
  flows=$(sum flows r1/pt_workload-*/trace.perfetto-trace r2/pt_workload-*/trace.perfetto-trace)
  check both.perfetto-trace --processes 3 --slices "$slices" --flows "$flows"
  # a folder alone: its merged trace at the top is not read again
  "$xptrace" merge r1 >m1.out 2>m1.err || fail "merge r1: $(cat m1.err)"
  [ -s r1/trace-1.perfetto-trace ] || fail "merge r1: no r1/trace-1.perfetto-trace: $(ls r1)"
  check r1/trace-1.perfetto-trace --processes 1 --slices "$(sum slices r1/pt_workload-*/trace.perfetto-trace)"
  cp -r r1 r1copy
  "$xptrace" merge -o dup.perfetto-trace r1 r1copy >d.out 2>d.err || fail "merge dup: $(cat d.err)"
  grep -q "pid [0-9]* is another process's too: shown as [0-9]*" d.err || fail "pid clash not said: $(cat d.err)"
  check dup.perfetto-trace --processes 2 --process-name pt_workload=2 \
    --slices $((2 * $(sum slices r1/pt_workload-*/trace.perfetto-trace)))
  # a trace file given alone, and a folder and a file together
  t=$(ls r2/pt_workload-*/trace.perfetto-trace | head -n 1)
  "$xptrace" merge -o one.perfetto-trace "$t" r1 2>o.err || fail "merge file+dir: $(cat o.err)"
  check one.perfetto-trace --processes 2
  ;;
shared)
  # Three `xptrace run`s at once with one -o: every process keeps its
  # folder and trace, each run merges only its own processes.
  for i in 1 2 3; do
    "$xptrace" run -o shared -- "$w" fork >"s$i.out" 2>"s$i.err" &
  done
  wait
  for i in 1 2 3; do
    grep -q "^xptrace: trace .*shared/trace.*\.perfetto-trace (open in" "s$i.err" || fail "run $i: $(cat "s$i.err")"
  done
  n=$(ls -d shared/pt_workload-*/ | wc -l)
  [ "$n" = 6 ] || fail "expected 6 process folders, found $n: $(ls shared)"
  merged=$(ls shared/trace*.perfetto-trace | wc -l)
  [ "$merged" = 3 ] || fail "expected 3 merged traces, found $merged: $(ls shared)"
  one=$(sum slices "$(ls -d shared/pt_workload-*/ | head -n 1)trace.perfetto-trace")
  for t in shared/trace*.perfetto-trace; do
    check "$t" --processes 2 --slices $((2 * one))
  done
  "$xptrace" merge -o all.perfetto-trace shared 2>all.err || fail "merge shared: $(cat all.err)"
  check all.perfetto-trace --processes 6 --slices "$(sum slices shared/pt_workload-*/trace.perfetto-trace)"
  ;;
bad)
  # Bad input: one line, a documented exit status, never a crash.
  "$xptrace" run -o r -- "$w" threads 2 200 >r.out 2>r.err || fail "run: $(cat r.err)"
  t=$(ls r/pt_workload-*/trace.perfetto-trace)
  expect() { # STATUS MESSAGE ARGS...
    want=$1 msg=$2
    shift 2
    "$xptrace" merge "$@" >e.out 2>e.err
    rc=$?
    [ "$rc" = "$want" ] || fail "merge $*: exit $rc, expected $want: $(cat e.err)"
    grep -qF -- "$msg" e.err || fail "merge $*: no '$msg' in: $(cat e.err)"
    [ "$(grep -c '^xptrace: merge: ' e.err)" = 1 ] || fail "merge $*: not one line: $(cat e.err)"
  }
  "$xptrace" merge >e.out 2>e.err
  [ $? = 2 ] || fail "no argument: not exit 2"
  grep -q '^usage: xptrace merge' e.err || fail "no argument: no usage: $(cat e.err)"
  mkdir empty
  expect 1 "no trace (*.perfetto-trace) in empty" empty
  expect 1 "cannot read nowhere: No such file or directory" -o x.perfetto-trace nowhere "$t"
  [ -s x.perfetto-trace ] || fail "the readable input was not merged"
  # Cut inside the packet around the middle (a cut on a packet boundary
  # leaves a shorter whole trace, not a truncated one).
  cut=$(python3 -c '
import sys
data = open(sys.argv[1], "rb").read()
pos = 0
while True:
    start = pos
    pos += 1  # the tag of field 1, TracePacket
    length = shift = 0
    while True:
        b = data[pos]
        pos += 1
        length |= (b & 0x7f) << shift
        shift += 7
        if b < 0x80:
            break
    pos += length
    if pos > len(data) // 2:
        print(min(start + 2, pos - 1))  # inside, even a 2-byte packet
        break
' "$t") || fail "cannot find a packet to cut"
  head -c "$cut" "$t" >cut.perfetto-trace
  expect 1 "cut.perfetto-trace: truncated at byte" -o cut-merged.perfetto-trace cut.perfetto-trace
  "$dump" cut-merged.perfetto-trace >dump.out 2>&1 || fail "the packets before the cut are not a trace: $(cat dump.out)"
  printf '\012\377\377\377\377\017garbage' >junk.perfetto-trace
  expect 1 "junk.perfetto-trace: corrupt at byte 0" -o junk-merged.perfetto-trace junk.perfetto-trace
  printf 'not a trace at all' >text.perfetto-trace
  expect 1 "text.perfetto-trace: " -o text-merged.perfetto-trace text.perfetto-trace
  "$xptrace" merge --bogus r >e.out 2>e.err
  [ $? = 2 ] || fail "--bogus: not exit 2"
  [ "$(head -n 1 e.err)" = "xptrace: unknown option '--bogus'" ] || fail "--bogus: $(cat e.err)"
  ;;
memory)
  # The merge streams: its peak memory does not grow with the input.
  # (Sanitizers add shadow memory and quarantine: the bound is checked
  # without them; under them the merge runs on a smaller input.)
  if [ -n "$sanitize" ]; then events=100000; else events=1200000; fi
  for i in 1 2 3 4; do
    "$gen" "in$i.perfetto-trace" $((1000 + i)) 4 "$events" 10 || fail "gen $i"
  done
  ls -l in*.perfetto-trace
  rss=$(python3 -c 'import resource, subprocess, sys
rc = subprocess.run(sys.argv[1:]).returncode
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss if rc == 0 else -1)' \
    "$xptrace" merge -o big.perfetto-trace in1.perfetto-trace in2.perfetto-trace \
    in3.perfetto-trace in4.perfetto-trace)
  [ "$rss" -gt 0 ] || fail "merge failed"
  bytes=$(cat in*.perfetto-trace | wc -c)
  echo "merge: $bytes input bytes, peak RSS $rss KiB"
  [ -n "$sanitize" ] || [ "$rss" -lt 65536 ] || fail "peak RSS $rss KiB for $bytes bytes of input"
  [ -n "$sanitize" ] || [ "$bytes" -gt 200000000 ] || fail "input only $bytes bytes"
  "$dump" big.perfetto-trace >dump.out 2>&1 || fail "reader: $(cat dump.out)"
  half=$((4 * 4 * events / 2))
  grep -q " begins=$half ends=$half " dump.out || fail "not every event merged: $(cat dump.out)"
  grep -q " processes=4 threads=16 " dump.out || fail "tracks: $(cat dump.out)"
  grep -q " flows=40 " dump.out || fail "flows: $(cat dump.out)"
  rm -f in*.perfetto-trace big.perfetto-trace # not left on the disk
  # Many threads: memory a few hundred bytes per sequence (a fixed table
  # of 64 sequence clocks took 2 KiB each: 151 MB for 70,000 threads).
  "$gen" threads.perfetto-trace 3000 50000 2 >/dev/null || fail "gen threads"
  rss=$(python3 -c 'import resource, subprocess, sys
rc = subprocess.run(sys.argv[1:]).returncode
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss if rc == 0 else -1)' \
    "$xptrace" merge -o threads-merged.perfetto-trace threads.perfetto-trace)
  echo "merge: 50,000 threads, peak RSS $rss KiB"
  [ "$rss" -gt 0 ] || fail "merge of 50,000 threads failed"
  [ -n "$sanitize" ] || [ "$rss" -lt 40960 ] || fail "peak RSS $rss KiB for 50,000 threads"
  "$dump" threads-merged.perfetto-trace >dump.out 2>&1 || fail "reader: $(cat dump.out)"
  grep -q " begins=50000 ends=50000 .* threads=50000 " dump.out || fail "threads: $(cat dump.out)"
  rm -f threads.perfetto-trace threads-merged.perfetto-trace
  ;;
finish-memory)
  # `xptrace finish` streams too: a recording of ~100 MB (2 threads, 3M
  # slices; 2 MB under sanitizers) left by a program whose launcher was to
  # finish it, finished in memory that does not follow its size (the
  # recording's whole size was mapped in: 2.3 GB held 2.28 GB).
  if [ -n "$sanitize" ]; then pairs=50000; else pairs=1500000; fi
  mkdir rec
  XPTI_TRACE_ENABLE=1 XPTI_FRAMEWORK_DISPATCHER="$(dirname "$xptrace")/../lib/libxptifw.so" \
    XPTI_SUBSCRIBERS="$(dirname "$xptrace")/../lib/libxpti_perfetto.so" XPTRACE_FINISHER=launcher \
    XPTRACE_OUTPUT="$PWD/rec" "$w" threads 2 "$pairs" >w.out 2>w.err || fail "workload: $(cat w.err)"
  bytes=$(cat rec/events*.xprec* | wc -c)
  rss=$(python3 -c 'import resource, subprocess, sys
rc = subprocess.run(sys.argv[1:], stderr=open("finish.err", "w")).returncode
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss if rc == 0 else -1)' \
    "$xptrace" finish rec)
  [ "$rss" -gt 0 ] || fail "finish failed"
  echo "finish: $bytes bytes of recording, peak RSS $rss KiB"
  [ -n "$sanitize" ] || [ "$bytes" -gt 90000000 ] || fail "recording only $bytes bytes"
  [ -n "$sanitize" ] || [ "$rss" -lt 32768 ] || fail "peak RSS $rss KiB for $bytes bytes of recording"
  "$dump" rec/trace.perfetto-trace >dump.out 2>&1 || fail "reader: $(cat dump.out)"
  # Every slice whole in the trace or counted as dropped (a busy machine
  # can leave the recorder's thread behind the two producers).
  begins=$(sed -n 's/.* begins=\([0-9]*\) .*/\1/p' dump.out)
  ends=$(sed -n 's/.* ends=\([0-9]*\) .*/\1/p' dump.out)
  dropped=$(sed -n 's/.* dropped \([0-9]*\) events.*/\1/p' finish.err)
  [ "$begins" = "$ends" ] || fail "half slices: $(cat dump.out)"
  [ $((begins + ends + ${dropped:-0})) -eq $((4 * pairs)) ] ||
    fail "events in the trace $((begins + ends)) + dropped ${dropped:-0} != $((4 * pairs))"
  [ "$begins" -gt "$pairs" ] || fail "most slices lost: $(cat dump.out) $(cat finish.err)"
  rm -rf rec
  ;;
processes)
  # gcc compiling and linking runs five real programs (gcc, cc1, as,
  # collect2, ld), none making XPTI calls: the run leaves its samples
  # trace at the top.  After `xptrace merge`, the report of the folder,
  # of the merged trace and of the samples trace agree, and each process's
  # samples are those of samples.folded (never counted twice).
  printf 'int f(int x) { return x * 2; }\nint main(void) { return f(1); }\n' >t.c
  # 1 kHz: the compile's ~40 ms of CPU time gave 0 samples at 100 Hz once
  # (ASan build, loaded machine: 4.7 expected); some of the five may still
  # get none (each is still listed)
  "$xptrace" run --sample -f 1000 -o run -- gcc t.c -o t.out >run.out 2>run.err
  [ $? = 0 ] || fail "run: $(cat run.err)"
  nproc=$(sed -n 's/.* sampled in \([0-9]*\) processes$/\1/p' run.err)
  [ "$nproc" = 5 ] || fail "gcc ran $nproc processes, not 5: $(cat run.err)"
  # the summary lists every one of them (those without a sample too)
  for name in gcc cc1 as collect2 ld; do
    grep -q "^  process [0-9]* $name: [0-9]* samples" run.err || fail "summary: no line of $name: $(cat run.err)"
  done
  "$xptrace" merge run >merge.out 2>&1 || fail "merge: $(cat merge.out)"
  grep -q "(5 processes," merge.out || fail "merge: $(cat merge.out)"
  # truth: samples per pid in the folded file ("[name-pid];[thread];... count";
  # the program's own process has no "[name-pid];")
  main=$(sed -n 's/^xptrace sample: gcc (pid \([0-9]*\)).*/\1/p' run.err)
  sed -n 's/^\[[^]]*-\([0-9]*\)\];\[.* \([0-9]*\)$/\1 \2/p; t; s/^.* \([0-9]*\)$/'"$main"' \1/p' \
    run/samples.folded | awk '{n[$1] += $2} END {for (p in n) print p, n[p]}' | sort -n >folded.txt
  for src in run run/trace.perfetto-trace run/samples.perfetto-trace; do
    "$xptrace" report --top 0 --format csv "$src" >report.csv 2>report.err ||
      fail "report $src: $(cat report.err)"
    rows=$(grep -c '^processes,' report.csv)
    [ "$rows" = 5 ] || fail "report $src: $rows processes, not 5: $(cat report.csv)"
    for name in gcc cc1 as collect2 ld; do
      grep -q "^processes,[0-9]*,$name," report.csv || fail "report $src: no process $name"
      grep -q "^threads,[0-9]*,[0-9]*,$name," report.csv || fail "report $src: no thread of $name"
    done
    awk -F, '$1 == "processes" && $6 > 0 {print $2, $6}' report.csv | sort -n >reported.txt
    cmp -s folded.txt reported.txt ||
      fail "report $src: samples per pid $(cat reported.txt | tr '\n' ' ') != folded $(cat folded.txt | tr '\n' ' ')"
  done
  ;;
*)
  fail "unknown mode"
  ;;
esac
[ "$failures" = 0 ] || exit 1
echo "PASS [$mode]"
