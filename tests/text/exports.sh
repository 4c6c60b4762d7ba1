#!/bin/sh
# libxpti_text.so exports exactly the two subscriber entry points.
# usage: exports.sh <nm> <libxpti_text.so>
got=$("$1" -D --defined-only "$2" | awk '{ print $3 }' | sort | tr '\n' ' ')
[ "$got" = "xptiTraceFinish xptiTraceInit " ] && exit 0
echo "FAIL: exported: $got"
exit 1
