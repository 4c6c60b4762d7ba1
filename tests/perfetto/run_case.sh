#!/bin/sh
# Run the workload under the perfetto collector and check what it wrote.
#   run_case.sh WORKLOAD COLLECTOR PROTO CHECKER OUTDIR FORMAT STATUS MODE [ARGS...] -- [ENV=V...] -- [CHECKER OPTIONS...]
# STATUS: the exit status the workload must end with (143 SIGTERM, 139 SIGSEGV).
# Env XPT_EXPECT_STDERR: a pattern the workload's stderr must contain.
# Env XPT_REJECT_STDERR: a pattern it must not contain.
# Env XPT_CHILD_TOO=1: the forked child's trace (OUTDIR/child-*) is checked too.
set -u
workload=$1 collector=$2 proto=$3 checker=$4 outdir=$5 format=$6 status=$7
shift 7
mode_args=""
while [ $# -gt 0 ] && [ "$1" != "--" ]; do mode_args="$mode_args $1"; shift; done
[ $# -gt 0 ] && shift
envs=""
while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs="$envs $1"; shift; done
[ $# -gt 0 ] && shift

if [ "$format" = proto ]; then tformat=perfetto; else tformat=json; fi
rm -rf "$outdir"
# shellcheck disable=SC2086
env XPTI_TRACE_ENABLE=1 XPTI_SUBSCRIBERS="$collector" XPTRACE_OUTPUT="$outdir" \
    XPTRACE_TRACE_FORMAT="$tformat" $envs "$workload" $mode_args 2>"$outdir.stderr"
rc=$?
# A killed process leaves its recording: finishing it is xptrace's job.
if [ "$rc" -ge 128 ]; then
  xptrace_bin="$(dirname "$collector")/../bin/xptrace"
  "$xptrace_bin" finish "$outdir" 2>>"$outdir.stderr" || { echo "FAIL: xptrace finish"; exit 1; }
  find "$outdir" -name 'events*.xprec' | grep -q . && { echo "FAIL: a recording was left"; exit 1; }
fi
cat "$outdir.stderr" >&2
if [ "$rc" -ne "$status" ]; then
  echo "FAIL: workload exited with $rc, expected $status"; exit 1
fi
if [ -n "${XPT_EXPECT_STDERR:-}" ] && ! grep -q "$XPT_EXPECT_STDERR" "$outdir.stderr"; then
  echo "FAIL: stderr lacks '$XPT_EXPECT_STDERR'"; exit 1
fi
if [ -n "${XPT_REJECT_STDERR:-}" ] && grep -q "$XPT_REJECT_STDERR" "$outdir.stderr"; then
  echo "FAIL: stderr has '$XPT_REJECT_STDERR'"; exit 1
fi
if [ "$format" = json ]; then name=trace.json; else name=trace.perfetto-trace; fi
check() {
  d=$1; shift
  if [ ! -s "$d/$name" ]; then echo "FAIL: no $d/$name"; exit 1; fi
  if [ "$format" = json ]; then
    python3 -m json.tool "$d/$name" >/dev/null || { echo "FAIL: json.tool rejects $d/$name"; exit 1; }
    python3 "$checker" json "$d/$name" "$@" || exit 1
  else
    python3 "$checker" proto "$proto" "$d/$name" "$@" || exit 1
  fi
}
check "$outdir" "$@"
if [ "${XPT_CHILD_TOO:-0}" = 1 ]; then
  found=0
  for d in "$outdir"/child-*; do
    [ -d "$d" ] || continue
    found=1
    check "$d" "$@"
  done
  [ $found = 1 ] || { echo "FAIL: no child trace folder in $outdir"; exit 1; }
fi
echo "PASS"
