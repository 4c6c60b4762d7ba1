#!/bin/sh
# The cost of a stub when tracing is off: one load, a test and a branch.
# usage: check_stub.sh <libxpti.a> [function]   (x86-64, optimised builds)
# Disassembles the stub and checks: at most 6 instructions, exactly one
# memory load (the table, PC-relative), an indirect tail jump, no call,
# no stack frame, no locked instruction.
archive=$1 fn=${2:-xptiTraceEnabled}
body=$(objdump -d --no-show-raw-insn "$archive" |
  awk -v fn="<$fn>:" '$2 == fn {on = 1; next} on && /^$/ {exit} on' |
  sed 's/^ *[0-9a-f]*:[[:space:]]*//' |
  grep -v -E '^(nop|xchg +%ax,%ax|data16|cs nop)')
[ -n "$body" ] || { echo "check_stub: $fn not found in $archive"; exit 1; }
echo "$body"
fail=0
count=$(echo "$body" | wc -l)
[ "$count" -le 6 ] || { echo "check_stub: $count instructions"; fail=1; }
[ "$(echo "$body" | grep -c '(%rip)')" -eq 1 ] || { echo "check_stub: not one table load"; fail=1; }
echo "$body" | grep -q -E '^jmp +\*%' || { echo "check_stub: no indirect tail jump"; fail=1; }
if echo "$body" | grep -q -E '^(call|push|lock)'; then echo "check_stub: call/push/lock"; fail=1; fi
exit $fail
