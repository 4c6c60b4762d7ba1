#!/bin/sh
# XPTI_TEXT_OUTPUT names a file that cannot be created: one message, and
# the trace goes to stderr instead.
# usage: bad_output.sh <xpti_example> <libxptifw.so> <libxpti_text.so> <work dir>
example=$1 dispatcher=$2 collector=$3 dir=$4
mkdir -p "$dir" && cd "$dir" || exit 1
bad="$dir/no-such-dir/trace.txt"
status=0
fail() { echo "FAIL: $*"; status=1; }
count() { # <expected> <fixed string> <file>
  n=$(grep -cF -- "$2" "$3")
  [ "$n" = "$1" ] || fail "expected $1 lines with '$2' in $3, found $n"
}
XPTI_FRAMEWORK_DISPATCHER="$dispatcher" XPTI_SUBSCRIBERS="$collector" XPTI_TEXT_OUTPUT="$bad" \
  "$example" >stdout.txt 2>stderr.txt || fail "example exited with $?"
count 1 "xpti: text collector cannot open '$bad': No such file or directory" stderr.txt
count 1 "xpti:" stderr.txt
count 24 " task_begin " stderr.txt
count 24 " task_end " stderr.txt
count 3 " xptiTraceFinish" stderr.txt
count 1 "(tracing on)" stdout.txt
[ -e "$bad" ] && fail "$bad exists"

# A device that refuses every write: nothing is printed per line, and the
# lost lines (all 75 of the example) are reported once at exit.
if [ -w /dev/full ]; then
  XPTI_FRAMEWORK_DISPATCHER="$dispatcher" XPTI_SUBSCRIBERS="$collector" XPTI_TEXT_OUTPUT=/dev/full \
    "$example" >full_stdout.txt 2>full_stderr.txt || fail "example (/dev/full) exited with $?"
  count 1 "xpti: text collector could not write 75 lines: No space left on device" full_stderr.txt
  count 1 "xpti:" full_stderr.txt
  count 1 "(tracing on)" full_stdout.txt
fi
[ $status = 0 ] || cat stderr.txt
exit $status
