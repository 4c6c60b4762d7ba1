#!/bin/sh
# run_mpi.sh MPIRUN XPTRACE MPI_APP PROTO CLOCK_APPLY sanitize:[LIST] MODE
# Runs `mpirun -np 4 xptrace run --mpi -- mpi_app MODE` (as root too:
# --allow-run-as-root) and checks the four ranks' traces with
# check_mpi.py.  MODE skew: a ring with rank 2's clock set back 200 ms
# (XPTRACE_MPI_TEST_CLOCK_OFFSET_NS); the skew must show without the
# correction and be gone with it.  Exit 77: skipped (reason printed).
set -u
mpirun=$1 xptrace=$2 app=$3 proto=$4 apply=$5 sanitize=${6#sanitize:} mode=$7
here=$(cd "$(dirname "$0")" && pwd)
if [ -z "$mpirun" ] || [ "$mpirun" = "MPIRUN_PROGRAM-NOTFOUND" ] || ! [ -x "$mpirun" ]; then
  echo "SKIP: mpirun not found (install openmpi-bin)"; exit 77
fi
command -v protoc >/dev/null || { echo "SKIP: protoc not found"; exit 77; }
case "$sanitize" in
*address*)
  # The layer (built with ASan) is preloaded ahead of the runtime the
  # program links; Open MPI's own start-up allocations are never freed
  # (lsan.supp names its libraries; full unwinding finds them).
  export ASAN_OPTIONS="verify_asan_link_order=0:fast_unwind_on_malloc=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
  export LSAN_OPTIONS="suppressions=$here/lsan.supp:print_suppressions=0"
  ;;
*thread*)
  export TSAN_OPTIONS="suppressions=$here/tsan.supp${TSAN_OPTIONS:+:$TSAN_OPTIONS}"
  ;;
esac
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
np=4 app_mode=$mode rounds=3 skew=""
if [ "$mode" = skew ]; then
  app_mode=ring skew="2:-200000000"
fi
export OMPI_MCA_rmaps_base_oversubscribe=1
run() { "$mpirun" --allow-run-as-root --oversubscribe -np $np "$@"; }

# The program's own output, without the tool, for comparison.
run "$app" $app_mode $rounds >plain.out 2>plain.err
plain_rc=$?
if [ $plain_rc -ne 0 ]; then
  echo "FAIL: mpi_app $app_mode alone exits $plain_rc"; cat plain.err; exit 1
fi
mkdir traced && cd traced || exit 1
if [ -n "$skew" ]; then
  XPTRACE_MPI_TEST_CLOCK_OFFSET_NS=$skew run "$xptrace" run --mpi -- "$app" $app_mode $rounds \
    >../traced.out 2>../traced.err
else
  run "$xptrace" run --mpi -- "$app" $app_mode $rounds >../traced.out 2>../traced.err
fi
rc=$?
cd ..
if [ $rc -ne 0 ]; then
  echo "FAIL: traced run exits $rc"; cat traced.err; exit 1
fi
if ! sort plain.out | cmp -s - "$(sort traced.out >sorted.out && echo sorted.out)"; then
  echo "FAIL: the program's output changed under xptrace run --mpi"
  diff plain.out traced.out; exit 1
fi
if grep -Eq "ERROR: (Address|Leak|Thread)Sanitizer|WARNING: ThreadSanitizer|runtime error" \
    plain.err traced.err; then
  echo "FAIL: sanitizer reports:"; grep -E -A20 "Sanitizer|runtime error" plain.err traced.err | head -80
  exit 1
fi
if grep -q "xpti:" traced.err; then
  echo "FAIL: messages from the layer or the collectors:"; grep "xpti:" traced.err; exit 1
fi
# Messages: one line per rank, one merge command for the whole job (from
# the last rank to end), no statistics table and no per-rank merge hint.
for r in $(seq 0 $((np - 1))); do
  [ "$(grep -c "^xptrace: rank $r of $np: trace .*/rank-$r-mpi_app-[0-9]*/trace.perfetto-trace, statistics .*/stats.csv\$" traced.err)" = 1 ] ||
    { echo "FAIL: not one line for rank $r:"; cat traced.err; exit 1; }
done
[ "$(grep -c '^xptrace' traced.err)" = $((np + 1)) ] ||
  { echo "FAIL: not $np + 1 lines from xptrace:"; cat traced.err; exit 1; }
job=$(sed -n "s/^xptrace: the $np ranks have ended; one trace of the job: xptrace merge //p" traced.err)
[ -n "$job" ] && [ -d "$job" ] || { echo "FAIL: no merge command for the job:"; cat traced.err; exit 1; }
"$xptrace" merge "$job" >job.merge 2>&1 && grep -q "($np processes," job.merge ||
  { echo "FAIL: the job's merge command: $(cat job.merge)"; exit 1; }
# One run folder for the job (its id names it), the ranks' folders inside.
set -- traced/xptrace-mpi_app-job*/rank-*-mpi_app-*
if [ $# -ne $np ]; then
  echo "FAIL: $# rank folders, expected $np"; ls -R traced; exit 1
fi
skewarg=""
[ -n "$skew" ] && skewarg="--skew $skew"
# As recorded (with a skew: it must show), then corrected by the function
# the merge calls, then in the trace `xptrace merge` makes of the four
# run folders (messages as arrows, ranks aligned).
python3 "$here/check_mpi.py" "$proto" $app_mode $rounds $np "$@" $skewarg || exit 1
python3 "$here/check_mpi.py" "$proto" $app_mode $rounds $np "$@" $skewarg --apply "$apply" || exit 1
"$xptrace" merge -o merged.perfetto-trace traced/xptrace-mpi_app-job*/rank-* 2>merge.err || {
  echo "FAIL: xptrace merge"; cat merge.err; exit 1; }
python3 "$here/check_mpi.py" "$proto" $app_mode $rounds $np "$@" $skewarg \
  --merged merged.perfetto-trace >merged.check || { cat merged.check; exit 1; }
cat merged.check
flows=$(sed -n 's/.*OK: [0-9]* ranks, \([0-9]*\) messages.*/\1/p' merged.check)
python3 "$here/../perfetto/check_trace.py" proto "$proto" merged.perfetto-trace --flows "$flows" \
  --threads $np
