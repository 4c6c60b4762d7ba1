#!/bin/sh
# Runs a test program in a clean XPTI environment and checks its stderr.
# usage: run_case.sh <needle|-> <lines> [VAR=value ...] -- program [args]
# stderr must have exactly <lines> lines, each containing <needle>.
needle=$1 lines=$2
shift 2
set -- env -u XPTI_TRACE_ENABLE -u XPTI_FRAMEWORK_DISPATCHER -u XPTI_SUBSCRIBERS "$@"
# drop the first "--", which separates the environment from the program
n=$# seen=
for arg in "$@"; do
  if [ -z "$seen" ] && [ "$arg" = "--" ]; then seen=1; else set -- "$@" "$arg"; fi
done
shift "$n"
err=$(mktemp) || exit 1
trap 'rm -f "$err"' EXIT
"$@" 2>"$err"
status=$?
cat "$err" >&2
if [ "$status" -ne 0 ]; then
  echo "run_case: exit status $status" && exit 1
fi
got=$(wc -l <"$err")
if [ "$got" -ne "$lines" ]; then
  echo "run_case: $got stderr lines, expected $lines" && exit 1
fi
if [ "$lines" -gt 0 ] && [ "$(grep -c -F -- "$needle" "$err")" -ne "$lines" ]; then
  echo "run_case: stderr lines do not all contain: $needle" && exit 1
fi
exit 0
