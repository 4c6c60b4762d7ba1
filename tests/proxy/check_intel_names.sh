#!/bin/sh
# Intel's static proxy resolves these 48 names and refuses a dispatcher
# lacking any one.  usage: check_intel_names.sh <names.txt> <libxptifw.so> <print_api_names>
# Each must be exported (as a function) by the dispatcher and be in api.def.
list=$1 dispatcher=$2 names=$3
fail=0
[ "$(grep -c . "$list")" -eq 48 ] || { echo "check_intel_names: expected 48 names in $list"; exit 1; }
exported=$(nm -D --defined-only "$dispatcher" | awk '$2 == "T" {print $NF}')
api=$("$names") || exit 1
for n in $(cat "$list"); do
  echo "$exported" | grep -qx "$n" || { echo "check_intel_names: $dispatcher lacks $n"; fail=1; }
  echo "$api" | grep -qx "$n" || { echo "check_intel_names: api.def lacks $n"; fail=1; }
done
exit $fail
