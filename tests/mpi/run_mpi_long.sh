#!/bin/sh
# run_mpi_long.sh MPIRUN XPTRACE MPI_APP ROUNDS
# `xptrace run --mpi -- mpirun -np 2 mpi_app ring ROUNDS`, the launcher
# outside mpirun as a user types it: every call of both ranks must be in
# the trace (a send and a receive per round, each a flow), the statistics
# must count the same, and nothing may be dropped.  Exit 77: skipped.
set -u
mpirun=$1 xptrace=$2 app=$3 rounds=$4
if [ -z "$mpirun" ] || [ "$mpirun" = "MPIRUN_PROGRAM-NOTFOUND" ] || ! [ -x "$mpirun" ]; then
  echo "SKIP: mpirun not found (install openmpi-bin)"; exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
"$xptrace" run --mpi -o out -- "$mpirun" --allow-run-as-root --oversubscribe -np 2 \
  "$app" ring "$rounds" >run.out 2>run.err
rc=$?
[ $rc -eq 0 ] || { echo "FAIL: exit $rc"; cat run.err; exit 1; }
if grep -Eq "dropped [1-9]|xpti:" run.err; then
  echo "FAIL: drops or messages:"; grep -E "dropped [1-9]|xpti:" run.err; exit 1
fi
"$xptrace" report --format json --top 0 out/trace.perfetto-trace >report.json || {
  echo "FAIL: report"; exit 1; }
python3 - "$rounds" report.json out <<'PY' || exit 1
import csv, glob, json, sys
rounds, rep, out = int(sys.argv[1]), json.load(open(sys.argv[2])), sys.argv[3]
want = {"MPI_Init": 2, "MPI_Comm_rank": 2, "MPI_Comm_size": 2, "MPI_Finalize": 2,
        "MPI_Send": 2 * rounds, "MPI_Recv": 2 * rounds}
got = {r["name"]: r["count"] for r in rep["points"]["rows"] if r["category"] == "mpi.api"}
if got != want:
    sys.exit("FAIL: trace counts %s, expected %s" % (got, want))
stats = {}
for f in glob.glob(out + "/rank-*/stats.csv"):
    for row in csv.DictReader(open(f)):
        if row["stream"] == "mpi.api":
            stats[row["name"]] = stats.get(row["name"], 0) + int(row["count"])
if stats != want:
    sys.exit("FAIL: statistics counts %s, expected %s" % (stats, want))
print("OK: %d MPI slices in the trace and the statistics" % sum(want.values()))
PY
# Every message a flow: one start and one arrival per message.
dump=$("$(dirname "$xptrace")/pt_read_dump" out/trace.perfetto-trace 2>/dev/null) || dump=""
case "$dump" in
*" flows=$((2 * rounds)) "*) ;;
"") ;; # the dump tool is built with the tests (tests/merge): optional here
*) echo "FAIL: expected $((2 * rounds)) flows: $dump"; exit 1 ;;
esac
echo "OK: $rounds rounds on 2 ranks, nothing dropped"
