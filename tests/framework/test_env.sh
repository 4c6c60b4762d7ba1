#!/usr/bin/env bash
# XPTI_TRACE_ENABLE and XPTI_SUBSCRIBERS read by the dispatcher itself.
#   test_env.sh <test_env binary> <a valid subscriber library>
set -u
bin=$1 sub=$2
fail=0
check() { # expected-stdout expected-stderr-lines stderr-pattern env...
  local want=$1 lines=$2 pattern=$3
  shift 3
  local out err
  err=$(mktemp)
  out=$(env -u XPTI_TRACE_ENABLE -u XPTI_SUBSCRIBERS XPTI_TEXT_OUTPUT=/dev/null "$@" "$bin" 2>"$err")
  local n
  n=$(grep -c . "$err")
  if [ "$out" != "$want" ] || [ "$n" != "$lines" ] || { [ -n "$pattern" ] && ! grep -q -- "$pattern" "$err"; }; then
    echo "FAIL: env $*: got '$out' with $n stderr lines:"; cat "$err"; fail=1
  fi
  rm -f "$err"
}
check "enabled=0 init=success" 0 ""
check "enabled=1 init=success" 0 "" XPTI_SUBSCRIBERS="$sub"
check "enabled=1 init=success" 0 "" XPTI_SUBSCRIBERS=" $sub , " XPTI_TRACE_ENABLE=1
check "enabled=1 init=success" 0 "" XPTI_SUBSCRIBERS="$sub" XPTI_TRACE_ENABLE=true
check "enabled=0 init=success" 0 "" XPTI_SUBSCRIBERS="$sub" XPTI_TRACE_ENABLE=0
check "enabled=0 init=success" 0 "" XPTI_SUBSCRIBERS="$sub" XPTI_TRACE_ENABLE=false
check "enabled=0 init=success" 1 "xpti: XPTI_TRACE_ENABLE='TRUE' is not 1/true/0/false" \
  XPTI_SUBSCRIBERS="$sub" XPTI_TRACE_ENABLE=TRUE
check "enabled=0 init=success" 1 "xpti: cannot load subscriber '/no/such/lib.so'" \
  XPTI_SUBSCRIBERS=/no/such/lib.so
check "enabled=1 init=success" 1 "xpti: cannot load subscriber '/no/such/lib.so'" \
  XPTI_SUBSCRIBERS="/no/such/lib.so,$sub"
check "enabled=0 init=success" 1 "lacks xptiTraceInit" XPTI_SUBSCRIBERS="$(dirname "$sub")/libxptifw.so"
exit $fail
