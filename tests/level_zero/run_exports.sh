#!/bin/sh
# run_exports.sh OURS DEBIANS [DRIVER]: our libze_tracing_layer.so.1 exports every C
# name Debian's exports (23 table getters, zelGetTracerApiProcAddrTable,
# zelLoaderGetVersion, 144 zelTracer<Fn>RegisterCallback) and one more,
# zelTracerResetAllCallbacks; nothing else (no C++ names, no API entry).
ours=$1 debians=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
nm -D --defined-only "$ours" | awk '{print $3}' | sort >"$tmp/ours"
nm -D --defined-only "$debians" | awk '{print $3}' | grep -v '^_Z' | sort >"$tmp/debians"
n=$(wc -l <"$tmp/debians")
[ "$n" -eq 169 ] || { echo "FAIL: Debian's layer exports $n C names, expected 169"; exit 1; }
echo zelTracerResetAllCallbacks | cat - "$tmp/debians" | sort >"$tmp/want"
diff -u "$tmp/want" "$tmp/ours" || { echo "FAIL: exports differ"; exit 1; }
echo "exports: Debian's 169 C names and zelTracerResetAllCallbacks"
# The test driver (third argument): the 46 table getters and nothing else.
if [ -n "${3:-}" ]; then
  nm -D --defined-only "$3" | awk '{print $3}' | sort >"$tmp/driver"
  n=$(grep -c '^ze[st]\{0,1\}Get[A-Za-z]*ProcAddrTable$' "$tmp/driver")
  all=$(wc -l <"$tmp/driver")
  [ "$n" -eq 46 ] && [ "$all" -eq 46 ] ||
    { cat "$tmp/driver"; echo "FAIL: the driver exports $all names, $n getters; expected 46"; exit 1; }
  echo "driver exports: 46 table getters"
fi
