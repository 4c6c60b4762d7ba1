#!/bin/sh
# xpti_example under the text collector: exact counts of every kind of
# line, begin/end pairing, and the same result with tracing off.
# usage: example_output.sh <xpti_example> <libxptifw.so> <libxpti_text.so> <work dir>
example=$1 dispatcher=$2 collector=$3 dir=$4
mkdir -p "$dir" && cd "$dir" || exit 1
rm -f trace.txt
status=0
fail() { echo "FAIL: $*"; status=1; }
count() { # <expected> <extended regexp>: lines of trace.txt matching
  n=$(grep -cE -- "$2" trace.txt)
  [ "$n" = "$1" ] || fail "expected $1 lines matching '$2', found $n"
}

env -u XPTI_TRACE_ENABLE XPTI_FRAMEWORK_DISPATCHER="$dispatcher" XPTI_SUBSCRIBERS="$collector" \
  XPTI_TEXT_OUTPUT=trace.txt "$example" >stdout.txt 2>stderr.txt || fail "example exited with $?"
grep -qx 'xpti_example: 4 workers ran 24 tasks, checksum 38500 (tracing on)' stdout.txt ||
  fail "stdout: $(cat stdout.txt)"
[ -s stderr.txt ] && fail "unexpected stderr: $(cat stderr.txt)"

N='[0-9]+'
P="^$N $N:$N "
count 75 ''
count 75 "$P"
count 1 "${P}xpti\.framework xptiTraceInit major=1 minor=0 version=\"1\.0\.0\"$"
count 1 "${P}xpti\.framework xptiTraceFinish$"
count 1 "${P}example\.graph xptiTraceInit major=1 minor=0 version=\"1\.0\"$"
count 1 "${P}example\.work xptiTraceInit major=1 minor=0 version=\"1\.0\"$"
count 1 "${P}example\.graph xptiTraceFinish$"
count 1 "${P}example\.work xptiTraceFinish$"
count 1 "${P}example\.graph graph_create \"pipeline\" uid=$N instance=1 src=[^ ]*xpti_example\.c:$N \| nodes=6$"
count 6 " node_create "
count 2 "${P}example\.graph node_create \"(load|store)\" uid=$N instance=1 src=[^ ]+ parent=$N \| kind=\"io\" cost_us=$N$"
count 4 "${P}example\.graph node_create \"(parse|filter|transform|merge)\" uid=$N instance=1 src=[^ ]+ parent=$N \| kind=\"compute\" cost_us=$N$"
count 1 ' node_create "filter" .* cost_us=300$'
count 6 " edge_create "
count 6 "${P}example\.graph edge_create \"[a-z]+->[a-z]+\" uid=$N instance=1 src=[^ ]+ source=$N target=$N parent=$N$"
count 24 "${P}example\.work task_begin \"[a-z]+\" uid=$N instance=[2-5] src=[^ ]+ parent=$N \| kind=\"[a-z]+\" cost_us=$N$"
count 24 "${P}example\.work task_end \"[a-z]+\" uid=$N instance=[2-5] src=[^ ]+ parent=$N \| kind=\"[a-z]+\" cost_us=$N$"
count 4 "${P}example\.work example:user0_begin \"batch [0-3]\" uid=$N instance=1 src=[^ ]+ \| worker=[0-3] share=0\.25 last=(true|false)$"
count 4 "${P}example\.work example:user0_end \"batch [0-3]\" uid=$N instance=1 src=[^ ]+ \| worker=[0-3] share=0\.25 last=(true|false)$"
count 2 ' "batch 3" .* worker=3 share=0\.25 last=true$'

# field <name> <file>: the value of name=... on each line of file
field() { sed -n "s/.* $1=\([0-9]*\).*/\1/p" "$2"; }
# every task_begin has its task_end: same (uid, instance), each once
grep ' task_begin ' trace.txt | sed 's/.* uid=\([0-9]*\) instance=\([0-9]*\).*/\1 \2/' | sort >begin.txt
grep ' task_end ' trace.txt | sed 's/.* uid=\([0-9]*\) instance=\([0-9]*\).*/\1 \2/' | sort >end.txt
cmp -s begin.txt end.txt || fail "task_begin and task_end (uid, instance) differ"
[ "$(sort -u begin.txt | wc -l)" = 24 ] || fail "task (uid, instance) pairs are not distinct"
# tasks are children of the batches; edges join nodes
grep ':user0_begin ' trace.txt >batch.txt; field uid batch.txt | sort -u >batch_uids.txt
grep ' task_begin ' trace.txt >task.txt; field parent task.txt | sort -u >parent_uids.txt
cmp -s batch_uids.txt parent_uids.txt || fail "task parents are not the batch events"
grep ' node_create ' trace.txt >node.txt; field uid node.txt | sort -u >node_uids.txt
grep ' edge_create ' trace.txt >edge.txt
{ field source edge.txt; field target edge.txt; } | sort -u >edge_ends.txt
[ -z "$(comm -13 node_uids.txt edge_ends.txt)" ] || fail "an edge end is not a node"
# a task runs on its batch's thread, and each thread's lines are in time order
awk '{ split($2, t, ":"); if (t[2] in last && $1 < last[t[2]]) bad = 1; last[t[2]] = $1 }
     END { exit bad }' trace.txt || fail "timestamps go backwards within a thread"

# tracing off: same result, nothing printed by xpti
env -u XPTI_FRAMEWORK_DISPATCHER -u XPTI_SUBSCRIBERS "$example" >off.txt 2>off_err.txt ||
  fail "example (tracing off) exited with $?"
grep -qx 'xpti_example: 4 workers ran 24 tasks, checksum 38500 (tracing off)' off.txt ||
  fail "stdout (off): $(cat off.txt)"
[ -s off_err.txt ] && fail "unexpected stderr (off): $(cat off_err.txt)"

[ $status = 0 ] || { echo "---- trace.txt ----"; cat trace.txt; }
exit $status
