#!/bin/sh
# XPTI_SUBSCRIBERS = a missing file, a library without xptiTraceFinish,
# then the text collector: one message naming each of the first two, and
# the text collector still sees everything.
# usage: subscribers.sh <xpti_example> <libxptifw.so> <libxpti_text.so> <nofinish lib> <work dir>
example=$1 dispatcher=$2 collector=$3 nofinish=$4 dir=$5
mkdir -p "$dir" && cd "$dir" || exit 1
missing="$dir/libdoes_not_exist.so"
rm -f trace.txt
status=0
fail() { echo "FAIL: $*"; status=1; }
count() { # <expected> <fixed string> <file>
  n=$(grep -cF -- "$2" "$3")
  [ "$n" = "$1" ] || fail "expected $1 lines with '$2' in $3, found $n"
}
XPTI_FRAMEWORK_DISPATCHER="$dispatcher" XPTI_SUBSCRIBERS="$missing,$nofinish,$collector" \
  XPTI_TEXT_OUTPUT=trace.txt "$example" >stdout.txt 2>stderr.txt || fail "example exited with $?"
grep -F "xpti:" stderr.txt >messages.txt
count 2 "xpti:" stderr.txt
count 1 "$missing" messages.txt
count 1 "$nofinish" messages.txt
count 1 "xptiTraceFinish" messages.txt
count 0 "nofinish subscriber: init called" stderr.txt
count 1 "(tracing on)" stdout.txt
count 3 " xptiTraceInit " trace.txt
count 24 " task_begin " trace.txt
count 24 " task_end " trace.txt
count 6 " node_create " trace.txt
count 3 " xptiTraceFinish" trace.txt
[ $status = 0 ] || cat stderr.txt
exit $status
