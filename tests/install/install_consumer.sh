#!/usr/bin/env bash
# Install the build into a temporary prefix, build a program against it
# with pkg-config and with find_package(xptrace), and trace it with the
# installed xptrace.
set -euo pipefail
build=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null

export PKG_CONFIG_PATH=$tmp/prefix/lib/pkgconfig
# shellcheck disable=SC2046
cc -o "$tmp/consumer_pc" "$src/consumer.c" $(pkg-config --cflags --libs --static xpti)

mkdir "$tmp/cm"
cp "$src/consumer.c" "$tmp/cm/"
cp "$src/CMakeLists.consumer.txt" "$tmp/cm/CMakeLists.txt"
cmake -S "$tmp/cm" -B "$tmp/cm/build" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/cm/build" >/dev/null

for exe in "$tmp/consumer_pc" "$tmp/cm/build/consumer_cmake"; do
  out=$(env -u XPTI_FRAMEWORK_DISPATCHER "$exe")
  [ "$out" = "consumer done, tracing off" ] || { echo "FAIL: untraced run printed: $out"; exit 1; }
  (cd "$tmp" && "$tmp/prefix/bin/xptrace" run -c stats -o "$tmp/out" -- "$exe" >"$tmp/log" 2>&1) ||
    { cat "$tmp/log"; echo "FAIL: xptrace run failed"; exit 1; }
  grep -q "consumer done, tracing on" "$tmp/log" || { cat "$tmp/log"; echo "FAIL: not traced"; exit 1; }
  # the payload (XPTI_PAYLOAD_HERE in main) names the trace point: 3 visits
  # every process writes into a folder of its own under the run's folder
  grep -q '^consumer,task,main,span,3,' "$tmp"/out/*/stats.csv ||
    { cat "$tmp"/out/*/stats.csv; echo "FAIL: no stats row for 3 tasks"; exit 1; }
  rm -rf "$tmp/out"
done
echo "install consumer: ok"
