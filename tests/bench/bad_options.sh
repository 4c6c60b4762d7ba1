#!/bin/sh
# run_test must refuse malformed or missing options: exit status 2, one
# line naming the option, then the usage.
run_test=$1
failures=0

# expect_usage_error "text expected in the first line" args...
expect_usage_error() {
  expected=$1
  shift
  output=$("$run_test" "$@" 2>&1 >/dev/null)
  status=$?
  first=$(printf '%s\n' "$output" | head -n 1)
  if [ "$status" -ne 2 ]; then
    echo "FAIL: run_test $*: exit status $status, expected 2"
    failures=$((failures + 1))
  elif ! printf '%s\n' "$first" | grep -q -- "$expected"; then
    echo "FAIL: run_test $*: first line '$first' does not mention '$expected'"
    failures=$((failures + 1))
  elif ! printf '%s\n' "$output" | grep -q '^usage: run_test'; then
    echo "FAIL: run_test $*: no usage printed"
    failures=$((failures + 1))
  fi
}

ok="-y semantic -t 100 -i 1 -n 0"
expect_usage_error "--type is required" -t 100 -i 1 -n 0
expect_usage_error "--trace-points is required" -y semantic -i 1 -n 0
expect_usage_error "--test-id is required" -y semantic -t 100 -n 0
expect_usage_error "--num-threads is required" -y semantic -t 100 -i 1
expect_usage_error "--type" -y fast -t 100 -i 1 -n 0
expect_usage_error "--trace-points" -y semantic -t 5 -i 1 -n 0
expect_usage_error "--trace-points" -y semantic -t 100001 -i 1 -n 0
expect_usage_error "--trace-points" -y semantic -t 10x -i 1 -n 0
expect_usage_error "--test-id" -y semantic -t 100 -i 4 -n 0
expect_usage_error "--test-id" -y performance -t 100 -i 1:3:1 -n 0
expect_usage_error "--test-id" -y semantic -t 100 -i 1,,2 -n 0
expect_usage_error "--test-id" -y semantic -t 100 -i 3:1:1 -n 0
expect_usage_error "--test-id" -y semantic -t 100 -i 1:3:0 -n 0
expect_usage_error "--num-threads" -y semantic -t 100 -i 1 -n -1
expect_usage_error "--num-threads" -y semantic -t 100 -i 1 -n 0:2
expect_usage_error "--overhead" $ok -o 0.01
expect_usage_error "--overhead" $ok -o 16
expect_usage_error "--overhead" $ok --overhead abc
expect_usage_error "--tp-frequency" $ok -f 0
expect_usage_error "--tp-frequency" $ok --tp-frequency 101
expect_usage_error "unknown option '-x'" $ok -x
expect_usage_error "unknown option '--bogus'" $ok --bogus
expect_usage_error "needs a value" -y semantic -t 100 -i 1 -n
expect_usage_error "unexpected argument 'extra'" $ok extra

# --help is not an error.
if ! "$run_test" --help | grep -q '^usage: run_test'; then
  echo "FAIL: --help prints no usage"
  failures=$((failures + 1))
fi
# A valid command line with --f (the document's spelling) and -r runs.
if ! "$run_test" -y semantic -t 10 -i 1 -n 0 --f 50 -o 2 -r | grep -q '^report,semantic-1,0,pass-rate'; then
  echo "FAIL: a valid command line with --f/-o/-r did not run"
  failures=$((failures + 1))
fi

[ "$failures" -eq 0 ] && echo "all bad-option cases refused with status 2"
exit $(( failures > 0 ))
