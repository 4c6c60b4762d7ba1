#!/usr/bin/env bash
# Each configuration message is printed once per process (issue 8,
# row 15): 100 subscribers give one line about the 36 over the limit; a
# missing library listed three times gives one line.
#   test_messages_once.sh <test_env binary> <tiny subscriber library>
set -u
bin=$1 sub=$2
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
list=
for i in $(seq 1 100); do # distinct files: the same file is one subscriber
  cp "$sub" "$dir/libsub$i.so"
  list="$list${list:+,}$dir/libsub$i.so"
done
fail=0
run() { # expected-stdout expected-lines pattern XPTI_SUBSCRIBERS
  local out n
  out=$(env -u XPTI_TRACE_ENABLE XPTI_SUBSCRIBERS="$4" timeout 30 "$bin" 2>"$dir/err")
  n=$(grep -c . "$dir/err")
  if [ "$out" != "$1" ] || [ "$n" != "$2" ] || ! grep -q -- "$3" "$dir/err"; then
    echo "FAIL: got '$out' and $n stderr lines (want '$1', $2 lines with '$3'):"
    cat "$dir/err"
    fail=1
  fi
}
run "enabled=1 init=success" 1 "xpti: at most 64 subscribers; 36 more not loaded, the first '$dir/libsub65.so'" "$list"
run "enabled=0 init=success" 1 "xpti: cannot load subscriber '/no/such/lib.so'" \
  "/no/such/lib.so, /no/such/lib.so,/no/such/lib.so"
run "enabled=1 init=success" 1 "xpti: cannot load subscriber '/no/such/lib.so'" \
  "/no/such/lib.so,$dir/libsub1.so,/no/such/lib.so,$dir/libsub1.so"
exit $fail
