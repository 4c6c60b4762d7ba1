#!/bin/sh
# Issue 8: output folders and files others could tamper with.
# usage: test_unsafe_folders.sh MODE XPTRACE SAMPLE SCRATCH
#   once: an unusable output folder with stats, text and perfetto loaded
#         gives exactly one line (row 15).
#   root: as root, a folder owned by nobody (0777) is refused; symlinks
#         planted at every file name we create leave a root-owned victim
#         unchanged; a default name guessed and planted is not used
#         (row 4).  Skipped (77) when not root.
set -u
mode=$1 xptrace=$2 sample=$3 scratch=$4
lib=$(cd "$(dirname "$xptrace")/../lib" && pwd)
rm -rf "$scratch"
mkdir -p "$scratch"
chmod 755 "$scratch"
cd "$scratch" || exit 1
failures=0
fail() {
  echo "FAIL [$mode]: $*" >&2
  failures=$((failures + 1))
}

subs="$lib/libxpti_stats.so,$lib/libxpti_text.so"
[ -e "$lib/libxpti_perfetto.so" ] && subs="$subs,$lib/libxpti_perfetto.so"
# run_traced OUTDIR ARGS...: the sample with every collector, env only.
run_traced() {
  out=$1
  shift
  env XPTI_TRACE_ENABLE=1 XPTI_FRAMEWORK_DISPATCHER="$lib/libxptifw.so" \
    XPTI_SUBSCRIBERS="$subs" XPTRACE_OUTPUT="$out" XPTI_TEXT_OUTPUT=/dev/null "$@"
}

case $mode in
once)
  run_traced /proc/xptrace-no/out "$sample" >out.txt 2>err.txt
  n=$(grep -c "output directory '/proc/xptrace-no/out'" err.txt)
  [ "$n" -eq 1 ] || fail "$n lines about the folder, expected 1: $(cat err.txt)"
  ;;
root)
  if [ "$(id -u)" -ne 0 ] || ! id nobody >/dev/null 2>&1; then
    echo "SKIP: needs root and a 'nobody' user"
    exit 77
  fi
  echo "precious" >victim
  chmod 600 victim
  # A folder owned by someone else, open to all: refused, one line.
  mkdir theirs && chown nobody theirs && chmod 777 theirs
  want="output folder '$scratch/theirs' is owned by another user (uid $(id -u nobody)); not writing there"
  run_traced "$scratch/theirs" "$sample" >out.txt 2>err.txt
  [ "$(grep -c "$want" err.txt)" -eq 1 ] || fail "collectors: no single refusal: $(cat err.txt)"
  "$xptrace" run -o theirs -- "$sample" >out.txt 2>err.txt
  [ $? -eq 2 ] && grep -qF "xptrace: $want" err.txt || fail "xptrace run -o: $(cat err.txt)"
  "$xptrace" sample -o theirs -- true >out.txt 2>err.txt
  [ $? -eq 2 ] || fail "xptrace sample -o theirs accepted"
  [ -z "$(find theirs -mindepth 1)" ] || fail "written into the refused folder: $(ls theirs)"
  # Symlinks planted at every name we create (as if the folder had been
  # swapped or pre-filled): the victim stays as it was.
  mkdir ours && chmod 755 ours
  names="trace.perfetto-trace trace.json stats.csv stats.json text.log samples.folded samples.csv"
  for name in $names; do
    echo "precious" >"victim.$name"
    chmod 600 "victim.$name"
    ln -s "$scratch/victim.$name" "ours/$name"
  done
  "$xptrace" run -c perfetto,stats,text -o ours -- "$sample" >out.txt 2>err.txt ||
    fail "run into ours: $(cat err.txt)"
  # The sampler is preloaded: not possible under ASan (its runtime must come first).
  sampled=yes
  "$xptrace" sample -o ours -- "$sample" >out.txt 2>err.txt || {
    if grep -q "ASan runtime does not come first" err.txt; then sampled=no
    else fail "sample into ours: $(cat err.txt)"; fi
  }
  for name in $names; do
    [ "$(cat "victim.$name")" = precious ] || fail "victim changed through the symlink $name"
  done
  # run: every process writes into a new folder of its own; the merged
  # trace at the top takes a new name
  ls ours/xptrace_sample-*/stats.csv >/dev/null 2>&1 || fail "no process folder with stats.csv: $(ls ours)"
  [ -s ours/trace-1.perfetto-trace ] || fail "trace.perfetto-trace taken: no trace-1.perfetto-trace: $(ls ours)"
  # A short program may leave no samples (said so); what was written took a new name.
  ! grep -q "samples $scratch/ours/samples.folded" err.txt || fail "reported the symlink as our samples"
  [ "$sampled" = no ] || grep -q "no samples" err.txt || [ -e ours/samples-1.folded ] ||
    fail "samples.folded taken: no samples-1.folded: $(ls ours)"
  # XPTI_TEXT_OUTPUT naming a symlink: refused with one line, not followed.
  env XPTI_TRACE_ENABLE=1 XPTI_FRAMEWORK_DISPATCHER="$lib/libxptifw.so" \
    XPTI_SUBSCRIBERS="$lib/libxpti_text.so" XPTI_TEXT_OUTPUT="$scratch/ours/text.log" \
    "$sample" >out.txt 2>err.txt
  grep -qF "text collector cannot open '$scratch/ours/text.log': it is a symbolic link" err.txt ||
    fail "text output symlink: $(head -3 err.txt)"
  [ "$(cat victim.text.log)" = precious ] || fail "victim changed through the text output"
  # The default name, guessed from the pid and planted by another user
  # (a symlink, or a folder of theirs): never used.  exec keeps the pid.
  mkdir cwd && cd cwd || exit 1
  mkdir "$scratch/elsewhere" && chown nobody "$scratch/elsewhere" && chmod 777 "$scratch/elsewhere"
  sh -c 'ln -s "$1" "xptrace-xptrace_sample-$$" && echo $$ >../pid1 && exec env -u XPTRACE_OUTPUT \
    XPTI_TRACE_ENABLE=1 XPTI_FRAMEWORK_DISPATCHER="$2/libxptifw.so" XPTI_SUBSCRIBERS="$2/libxpti_stats.so" "$0"' \
    "$sample" "$scratch/elsewhere" "$lib" >out.txt 2>err.txt || fail "default name symlink: $(cat err.txt)"
  pid=$(cat ../pid1)
  [ -s "xptrace-xptrace_sample-$pid-1/stats.csv" ] || fail "default name symlink: no -1 folder: $(ls)"
  sh -c 'mkdir "xptrace-xptrace_sample-$$" && chown nobody "xptrace-xptrace_sample-$$" && echo $$ >../pid2 &&
    exec env -u XPTRACE_OUTPUT XPTI_TRACE_ENABLE=1 XPTI_FRAMEWORK_DISPATCHER="$1/libxptifw.so" \
    XPTI_SUBSCRIBERS="$1/libxpti_stats.so" "$0"' "$sample" "$lib" >out.txt 2>err.txt ||
    fail "default name folder: $(cat err.txt)"
  pid=$(cat ../pid2)
  [ -s "xptrace-xptrace_sample-$pid-1/stats.csv" ] || fail "default name planted folder: no -1: $(ls)"
  [ -z "$(find "$scratch/elsewhere" "xptrace-xptrace_sample-$pid" -mindepth 1)" ] ||
    fail "written into a planted default folder"
  # xptrace run's default name, planted as a symlink.
  sh -c 'ln -s "$1" "xptrace-true-$$" && echo $$ >../pid3 && exec "$0" run -c stats -- true' \
    "$xptrace" "$scratch/elsewhere" >out.txt 2>err.txt || fail "run default name: $(cat err.txt)"
  pid=$(cat ../pid3)
  grep -qF "xptrace: output in $scratch/cwd/xptrace-true-$pid-1" err.txt ||
    fail "run default name planted: $(cat err.txt)"
  [ "$(cat ../victim)" = precious ] || fail "victim changed"
  [ -z "$(find "$scratch/elsewhere" -mindepth 1)" ] || fail "written through a planted symlink"
  ;;
*)
  echo "unknown mode $mode" >&2
  exit 2
  ;;
esac
[ "$failures" -eq 0 ] || exit 1
echo "[$mode] OK"
