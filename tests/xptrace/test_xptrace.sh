#!/bin/sh
# Tests of the xptrace command.
# usage: test_xptrace.sh MODE XPTRACE SAMPLE CHECK_STATS PYTHON SCRATCH
#   MODE: bad-input | help | env | stats | streams | exit | signal | text | perfetto | opencl
set -u
mode=$1 xptrace=$2 sample=$3 check=$4 python=$5 scratch=$6
rm -rf "$scratch"
mkdir -p "$scratch"
cd "$scratch" || exit 1
failures=0

fail() {
  echo "FAIL [$mode]: $*" >&2
  failures=$((failures + 1))
}
# Every process of a run writes into a folder of its own in the run's
# folder: proc DIR names the (only) one.
proc() { ls -d "$1"/*/ | head -n 1; }

# expect_usage_error MESSAGE ARGS...: exit 2, the message, the usage, and
# the command (touch marker) never ran.
expect_usage_error() {
  want=$1
  shift
  rm -f marker
  "$xptrace" "$@" >out.txt 2>err.txt
  rc=$?
  [ "$rc" -eq 2 ] || fail "'$*': exit $rc, expected 2"
  grep -qF -- "$want" err.txt || fail "'$*': no '$want' in: $(cat err.txt)"
  head -n 1 err.txt | grep -q '^xptrace: ' || fail "'$*': first line not 'xptrace: ...'"
  grep -q '^usage: ' err.txt || fail "'$*': no usage printed"
  [ "$(grep -c '^xptrace: ' err.txt)" -eq 1 ] || fail "'$*': more than one message line"
  [ ! -e marker ] || fail "'$*': the command was run"
}

# expect_folder_error MESSAGE ARGS...: exit 2, that one line and nothing
# else (no usage: the command line was right), the command never ran.
expect_folder_error() {
  want=$1
  shift
  rm -f marker
  "$xptrace" "$@" >out.txt 2>err.txt
  rc=$?
  [ "$rc" -eq 2 ] || fail "'$*': exit $rc, expected 2"
  [ "$(wc -l <err.txt)" -eq 1 ] || fail "'$*': not one line: $(cat err.txt)"
  case "$(cat err.txt)" in "xptrace: $want"*) ;; *) fail "'$*': not '$want': $(cat err.txt)" ;; esac
  [ ! -e marker ] || fail "'$*': the command was run"
}

case $mode in
bad-input)
  expect_usage_error "unknown option '--bogus'" run --bogus -- touch marker
  expect_usage_error "unknown option '-x'" run -x -- touch marker
  expect_usage_error "missing command" run -c stats
  expect_usage_error "missing command" run -c stats --
  expect_usage_error "unknown collector 'nope'" run -c stats,nope -- touch marker
  expect_usage_error "no collector given" run -c , -- touch marker
  expect_usage_error "buffer size '12Q' is not a size" run -c stats --buffer-size 12Q -- touch marker
  # Below one 64K chunk every event would be dropped (issue 8, row 13).
  for size in 0 1 1K 65535; do
    expect_usage_error "buffer size '$size' is below the minimum of 64K" \
      run -c stats --buffer-size "$size" -- touch marker
  done
  expect_usage_error "unknown buffer policy 'sometimes'" run -c stats --buffer-policy sometimes -- touch marker
  expect_usage_error "unknown format 'xml'" run -c stats --format xml -- touch marker
  expect_usage_error "option '--output' needs a value" run --output
  expect_usage_error "option '-o' needs a value" run -o
  # Blank lists and names (issue 8, row 14).
  expect_usage_error "stream list '' names no stream" run -c stats --streams "" -- touch marker
  expect_usage_error "stream list ',' names no stream" run -c stats --streams , -- touch marker
  expect_usage_error "stream list ' , ' names no stream" run -c stats --streams " , " -- touch marker
  expect_usage_error "empty output folder name" run -c stats -o "" -- touch marker
  expect_usage_error "empty output folder name" sample -o "" -- touch marker
  # An existing output folder must be ours, a real folder, closed to others.
  mkdir -p open777 open770 && chmod 777 open777 && chmod 770 open770
  expect_folder_error "output folder '$scratch/open777' is writable by others; not writing there" \
    run -c stats -o open777 -- touch marker
  expect_folder_error "output folder '$scratch/open770' is writable by its group; not writing there" \
    run -c stats -o open770 -- touch marker
  mkdir -p real && ln -s real linked
  expect_folder_error "output folder '$scratch/linked' is a symbolic link; not writing there" \
    run -c stats -o linked -- touch marker
  [ -z "$(find open777 open770 real -mindepth 1)" ] || fail "something written into a refused folder"
  : >plainfile
  expect_folder_error "cannot create output directory '$scratch/plainfile/out'" \
    run -c stats -o plainfile/out -- touch marker
  mkdir -p locked && chmod 555 locked
  if [ "$(id -u)" -ne 0 ]; then # root may write anywhere
    expect_folder_error "cannot create output directory '$scratch/locked/out'" \
      run -c stats -o locked/out -- touch marker
  fi
  expect_folder_error "cannot create output directory '/proc/xptrace-no/out'" \
    run -c stats -o /proc/xptrace-no/out -- touch marker
  expect_usage_error "unknown subcommand 'launch'" launch -- touch marker
  expect_usage_error "unknown option '--bogus'" --bogus
  expect_usage_error "missing subcommand"
  expect_usage_error "unknown option '--bogus'" avail --bogus
  expect_usage_error "unexpected argument 'x'" avail x
  # Commands that cannot run: the shell's status and wording, nothing
  # created (issue 8, row 14).
  expect_cannot_run() {
    want_rc=$1 want=$2
    shift 2
    "$xptrace" run -c stats -o notrun -- "$@" >out.txt 2>err.txt
    rc=$?
    [ "$rc" -eq "$want_rc" ] || fail "'$*': exit $rc, expected $want_rc"
    [ "$(cat err.txt)" = "$want" ] || fail "'$*': message '$(cat err.txt)', expected '$want'"
    [ ! -e notrun ] || fail "'$*': output folder created for a command that cannot run"
    rm -rf notrun
  }
  expect_cannot_run 127 "xptrace: ./no-such-command: No such file or directory" ./no-such-command
  expect_cannot_run 127 "xptrace: no-such-command-xyz: command not found" no-such-command-xyz
  expect_cannot_run 126 "xptrace: /tmp: Is a directory" /tmp
  : >notexec && chmod 644 notexec
  if [ "$(id -u)" -ne 0 ] || [ ! -x notexec ]; then
    expect_cannot_run 126 "xptrace: ./notexec: Permission denied" ./notexec
  fi
  before=$(ls)
  "$xptrace" run -c stats -- /tmp >out.txt 2>err.txt
  [ "$?" -eq 126 ] || fail "run -- /tmp (default folder): not 126"
  [ "$(ls)" = "$before" ] || fail "run -- /tmp left a folder behind: $(ls)"
  ;;
help)
  for args in "--help" "run --help" "avail --help" "help" "run -h"; do
    # shellcheck disable=SC2086
    "$xptrace" $args >out.txt 2>err.txt || fail "'$args' failed"
    grep -q '^usage: xptrace' out.txt || fail "'$args': no usage on stdout"
  done
  "$xptrace" run --help | grep -q -- '--buffer-policy' || fail "run --help lacks options"
  "$xptrace" --version | grep -q '^xptrace [0-9]' || fail "--version"
  "$xptrace" avail >avail.txt || fail "avail failed"
  for word in perfetto stats text XPTI_TRACE_ENABLE XPTI_FRAMEWORK_DISPATCHER XPTI_SUBSCRIBERS \
    XPTI_TEXT_OUTPUT XPTRACE_OUTPUT XPTRACE_TRACE_FORMAT XPTRACE_BUFFER_SIZE \
    XPTRACE_BUFFER_POLICY XPTRACE_STREAMS OPENCL_LAYERS; do
    grep -q "^  $word " avail.txt || fail "avail lacks $word"
  done
  grep -Eq '^  task_begin +10$' avail.txt || fail "avail: task_begin 10"
  grep -Eq '^  function_with_args_end +29$' avail.txt || fail "avail: function_with_args_end 29"
  grep -Eq '^  offload_accessor +10$' avail.txt || fail "avail: offload_accessor 10"
  grep -Eq '^  stats .*\[found\]$' avail.txt || fail "avail: stats library not found"
  ;;
env)
  # Options become environment; libraries are absolute paths next to bin/.
  libdir=$(cd "$(dirname "$xptrace")/../lib" && pwd)
  "$xptrace" run -c stats,stats --format json --buffer-size 1M --buffer-policy ring \
    --streams 'a,b*' -o outdir -- sh -c 'env | grep -E "^(XPTI|XPTRACE)_" | sort' >env.txt 2>err.txt
  rc=$?
  [ "$rc" -eq 0 ] || fail "env run: exit $rc: $(cat err.txt)"
  for line in "XPTI_TRACE_ENABLE=1" "XPTI_FRAMEWORK_DISPATCHER=$libdir/libxptifw.so" \
    "XPTI_SUBSCRIBERS=$libdir/libxpti_stats.so" "XPTRACE_OUTPUT=$scratch/outdir" \
    "XPTRACE_TRACE_FORMAT=json" "XPTRACE_BUFFER_SIZE=1M" "XPTRACE_BUFFER_POLICY=ring" \
    "XPTRACE_STREAMS=a,b*"; do
    grep -qxF "$line" env.txt || fail "env lacks $line: $(cat env.txt)"
  done
  grep -qxF "xptrace: output in $scratch/outdir" err.txt || fail "output line: $(cat err.txt)"
  # Default folder: named after the command, created before it starts.
  "$xptrace" run -c stats -- sh -c 'test -d "$XPTRACE_OUTPUT" && echo "$XPTRACE_OUTPUT"' \
    >dir.txt 2>err.txt || fail "default dir run failed: $(cat err.txt)"
  dir=$(cat dir.txt)
  case $dir in
  "$scratch"/xptrace-sh-[0-9]*) ;;
  *) fail "default output folder '$dir'" ;;
  esac
  grep -qxF "xptrace: output in $dir" err.txt || fail "default dir not printed: $(cat err.txt)"
  # The default name (pid guessed) already taken: a new folder, never it.
  # exec keeps the shell's pid, so the name is known in advance.
  sh -c 'mkdir "xptrace-true-$$" && echo $$ >pid.txt && exec "$0" run -c stats -- true' \
    "$xptrace" 2>err.txt || fail "run with the default name taken: $(cat err.txt)"
  pid=$(cat pid.txt)
  grep -qxF "xptrace: output in $scratch/xptrace-true-$pid-1" err.txt ||
    fail "default name taken: not moved to -1: $(cat err.txt)"
  [ -z "$(ls "xptrace-true-$pid")" ] || fail "written into the pre-existing default folder"
  # Options of the command are the command's.
  "$xptrace" run -c stats -o o2 sh -c 'exit 0' --bogus || fail "command options taken by xptrace"
  # Verbose prints what it sets and runs.
  "$xptrace" run -v -c stats -o o3 -- true 2>err.txt || fail "verbose run failed"
  grep -q '^xptrace: XPTI_SUBSCRIBERS=' err.txt || fail "verbose: no environment"
  grep -q '^xptrace: running true' err.txt || fail "verbose: no command"
  ;;
stats)
  "$xptrace" run -c stats -o out -- "$sample" >out.txt 2>err.txt
  rc=$?
  [ "$rc" -eq 0 ] || fail "exit $rc: $(cat err.txt)"
  "$python" "$check" "$(proc out)" || fail "stats values"
  grep -q '^nap  *sample  *task  *10 ' err.txt || fail "no table on stderr: $(cat err.txt)"
  p=$scratch/$(proc out)
  grep -qxF "xptrace: statistics ${p%/}/stats.csv, ${p%/}/stats.json" err.txt ||
    fail "stats path not printed"
  ;;
streams)
  "$xptrace" run -c stats --streams sample -o out -- "$sample" >out.txt 2>err.txt ||
    fail "run failed: $(cat err.txt)"
  "$python" "$check" "$(proc out)" --only-sample || fail "stream selection"
  ;;
exit)
  "$xptrace" run -c stats -o out -- "$sample" 7 >out.txt 2>err.txt
  rc=$?
  [ "$rc" -eq 7 ] || fail "exit status $rc, expected 7"
  "$python" "$check" "$(proc out)" || fail "stats after exit(7)"
  "$xptrace" run -c stats -o out2 -- sh -c 'exit 42' 2>/dev/null
  rc=$?
  [ "$rc" -eq 42 ] || fail "exit status $rc, expected 42"
  # A command that never calls XPTI: one line says so (and what would
  # trace it), not a missing trace and missing statistics.
  "$xptrace" run -o out3 -- sh -c 'exit 3' 2>err3.txt
  rc=$?
  [ "$rc" -eq 3 ] || fail "exit status $rc, expected 3"
  [ "$(grep -c "made no XPTI calls: no events to trace or count (--functions" err3.txt)" = 1 ] ||
    fail "no-XPTI line: $(cat err3.txt)"
  ! grep -Eq "no trace written|no statistics|traces are in" err3.txt || fail "misleading lines: $(cat err3.txt)"
  ;;
signal)
  # Nothing of ours runs at signal time: xptrace finishes the trace from
  # the recording the program left; the stats table is an exit-time one.
  for case in segv:139:11:SIGSEGV term:143:15:SIGTERM; do
    mode=${case%%:*}; rest=${case#*:}; want=${rest%%:*}; rest=${rest#*:}
    "$xptrace" run -c perfetto,stats -o "$mode" -- "$sample" "$mode" >out.txt 2>err.txt
    rc=$?
    [ "$rc" -eq "$want" ] || fail "$mode: exit $rc, expected $want"
    grep -qxF "xptrace: $sample killed by signal ${rest%%:*} (${rest#*:})" err.txt || fail "$mode: $(cat err.txt)"
    [ -s "$mode/trace.perfetto-trace" ] || fail "$mode: no trace: $(cat err.txt)"
    grep -qF "xptrace: trace $PWD/$mode/trace.perfetto-trace" err.txt || fail "$mode: trace not named: $(cat err.txt)"
    ls "$mode"/events*.xprec >/dev/null 2>&1 && fail "$mode: the recording was left"
    grep -qF "xptrace: no statistics" err.txt || fail "$mode: missing stats not said: $(cat err.txt)"
  done
  # A SIGTERM sent to xptrace reaches the command; xptrace reports it.
  "$xptrace" run -c stats -o fwd -- sleep 30 2>err.txt &
  xpid=$!
  sleep 1
  kill -TERM "$xpid"
  wait "$xpid"
  rc=$?
  [ "$rc" -eq 143 ] || fail "forwarded SIGTERM: exit $rc"
  grep -qF "killed by signal 15 (SIGTERM)" err.txt || fail "forwarded: $(cat err.txt)"
  # Every signal that would end xptrace reaches the command and is said
  # (SIGUSR1 killed the launcher and left the command running): one the
  # command handles, one it dies of.
  rm -f ready
  "$xptrace" run -c stats -o usr1 -- sh -c 'trap "echo got USR1; exit 7" USR1; : >ready; while :; do sleep 0.02; done' \
    >usr1.txt 2>err.txt &
  xpid=$!
  while [ ! -e ready ]; do sleep 0.01; done
  kill -USR1 "$xpid"
  wait "$xpid"
  rc=$?
  [ "$rc" -eq 7 ] || fail "SIGUSR1 handled by the command: exit $rc: $(cat err.txt)"
  grep -qxF "got USR1" usr1.txt || fail "SIGUSR1 not seen by the command: $(cat usr1.txt)"
  grep -qxF "xptrace: passed SIGUSR1 on to sh" err.txt || fail "SIGUSR1 not said: $(cat err.txt)"
  rm -f ready
  "$xptrace" run -c stats -o usr2 -- sh -c ': >ready; exec sleep 30' 2>err.txt &
  xpid=$!
  while [ ! -e ready ]; do sleep 0.01; done
  kill -USR2 "$xpid"
  wait "$xpid"
  rc=$?
  [ "$rc" -eq 140 ] || fail "SIGUSR2: exit $rc, expected 140: $(cat err.txt)"
  grep -qF "killed by signal 12 (SIGUSR2)" err.txt || fail "SIGUSR2: $(cat err.txt)"
  # The command's first act signals xptrace: the handlers must already be
  # there (they were installed after the fork: xptrace died of it).
  for i in 1 2 3 4 5; do
    "$xptrace" run -c stats -o usr2-$i -- sh -c 'kill -USR2 $PPID; exec sleep 30' 2>err.txt
    rc=$?
    [ "$rc" -eq 140 ] && grep -qF "passed SIGUSR2 on to sh" err.txt ||
      fail "SIGUSR2 at once: exit $rc: $(cat err.txt)"
  done
  ;;
text)
  "$xptrace" run -c text,stats -o out -- "$sample" >out.txt 2>err.txt || fail "text run: $(cat err.txt)"
  [ -s out/text.log ] || fail "no text.log"
  "$python" "$check" "$(proc out)" || fail "stats next to text"
  ;;
perfetto)
  "$xptrace" run -o out -- "$sample" >out.txt 2>err.txt || fail "default run: $(cat err.txt)"
  [ -s out/trace.perfetto-trace ] || fail "no trace.perfetto-trace"
  grep -qxF "xptrace: trace $scratch/out/trace.perfetto-trace (open in https://ui.perfetto.dev)" err.txt ||
    fail "trace path not printed: $(cat err.txt)"
  "$python" "$check" "$(proc out)" || fail "stats next to perfetto"
  "$xptrace" run --format json -o json -- "$sample" >out.txt 2>err.txt || fail "json run"
  "$python" -c 'import json,sys; json.load(open(sys.argv[1]))' "$(proc json)trace.json" || fail "trace.json"
  ;;
opencl)
  libdir=$(cd "$(dirname "$xptrace")/../lib" && pwd)
  OPENCL_LAYERS=/opt/other/layer.so "$xptrace" run -c stats --opencl -o out -- \
    sh -c 'echo "$OPENCL_LAYERS"' >layers.txt 2>err.txt || fail "opencl run: $(cat err.txt)"
  grep -qxF "/opt/other/layer.so:$libdir/libxptrace_opencl.so" layers.txt ||
    fail "OPENCL_LAYERS: $(cat layers.txt)"
  env -u OPENCL_LAYERS "$xptrace" run -c stats --opencl -o out2 -- \
    sh -c 'echo "$OPENCL_LAYERS"' >layers.txt 2>err.txt || fail "opencl run 2"
  grep -qxF "$libdir/libxptrace_opencl.so" layers.txt || fail "OPENCL_LAYERS alone: $(cat layers.txt)"
  ;;
*)
  echo "unknown mode $mode" >&2
  exit 2
  ;;
esac
chmod -R u+w "$scratch" 2>/dev/null
[ "$failures" -eq 0 ] || exit 1
echo "[$mode] OK"
