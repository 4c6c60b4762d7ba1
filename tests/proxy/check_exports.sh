#!/bin/sh
# Export test.  usage: check_exports.sh <print_api_names> <libxptifw.so> <lib linking libxpti.a>
# 1. The dispatcher exports exactly the api.def functions, plus
#    xptiTraceTryToEnable, xptiReset, xptrace's xptraceStreamSoleListener, xptraceTraceEnabledWord and xptraceThreadStamp (and the linker's/sanitizers' own).
# 2. A shared library that links the proxy exports no xpti* symbol.
names=$1 dispatcher=$2 user=$3
fail=0
standard='^(_init|_fini|_edata|_end|__bss_start|__(asan|lsan|ubsan|tsan|odr_asan|sanitizer)[A-Za-z0-9_.]*)$'

expected=$( { "$names" && echo xptiTraceTryToEnable && echo xptiReset && echo xptraceStreamSoleListener && echo xptraceTraceEnabledWord && echo xptraceThreadStamp; } | sort) || exit 1
[ "$(echo "$expected" | wc -l)" -gt 10 ] || { echo "check_exports: api list too short"; exit 1; }
exported=$(nm -D --defined-only "$dispatcher" | awk '{print $NF}' | grep -v -E "$standard" | sort)
if [ "$expected" != "$exported" ]; then
  echo "check_exports: $dispatcher exports differ from api.def (< expected, > exported):"
  tmp=$(mktemp -d) || exit 1
  printf '%s\n' "$expected" >"$tmp/expected"
  printf '%s\n' "$exported" >"$tmp/exported"
  diff "$tmp/expected" "$tmp/exported"
  rm -rf "$tmp"
  fail=1
fi
# Every API symbol is a function (T), not data or an undefined weak.
if nm -D --defined-only "$dispatcher" | awk '$NF ~ /^xpt(i|race)/ && $2 != "T"' | grep .; then
  echo "check_exports: API symbols above are not functions"
  fail=1
fi

# The proxy's stubs are inside the library (local) but never exported.
if ! nm "$user" | grep -q ' t xptiTraceEnabled$'; then
  echo "check_exports: $user does not contain the proxy's stubs as local symbols"
  fail=1
fi
if ! nm -D --defined-only "$user" | grep -q ' proxy_user_trace_enabled$'; then
  echo "check_exports: $user does not export its own function"
  fail=1
fi
if nm -D --defined-only "$user" | awk '{print $NF}' | grep '^xpti'; then
  echo "check_exports: $user exports the xpti symbols above"
  fail=1
fi
exit $fail
