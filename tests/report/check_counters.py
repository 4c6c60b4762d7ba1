#!/usr/bin/env python3
"""xptrace run --counters on a CPU-burning fixture (burn.c), for real.

  check_counters.py XPTRACE BURN CHECK_TRACE PROTO OUT_DIR

Runs `xptrace run --counters default,cycles -- burn`; checks: the exit
status is burn's (0); the hardware counter either works (a PMU: its track
is there) or fails with exactly one `xptrace:` line and nothing else; the
counters trace passes check_trace.py (counters that only grow never
decrease); each burning thread's thread-cpu-time reaches its own
CLOCK_THREAD_CPUTIME_ID reading (burn prints it) and stays below the run's
wall time; task-clock covers both threads; page faults and the peak RSS
reflect the 8 MiB each thread touched; `xptrace report` lists them."""
import json
import os
import shutil
import subprocess
import sys
import time

XPTRACE, BURN, CHECK_TRACE, PROTO, OUT = sys.argv[1:6]


def fail(msg):
    print("check_counters: FAIL: " + msg)
    sys.exit(1)


shutil.rmtree(OUT, ignore_errors=True)
# xptrace avail lists the counters and whether this machine offers them.
av = subprocess.run([XPTRACE, "avail"], stdout=subprocess.PIPE).stdout.decode()
has_pmu = os.path.exists("/sys/bus/event_source/devices/cpu")
for name in ("thread-cpu-time", "task-clock", "rss", "cycles", "cache-misses"):
    line = [l for l in av.splitlines() if l.split()[:1] == [name]]
    if len(line) != 1:
        fail("avail lists %s %d times" % (name, len(line)))
    if line[0].endswith("[available]") != (has_pmu or name not in ("cycles", "cache-misses")):
        fail("avail: %r" % line[0])
if "opencl.api" not in av:
    fail("avail lists no stream names")
# A bad list: one line, the usage, nothing run or created.
bad = subprocess.run([XPTRACE, "run", "--counters", "nope", "-o", OUT, "--", BURN],
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
if bad.returncode != 2 or not bad.stderr.decode().startswith(
        "xptrace: unknown counter 'nope'") or bad.stdout or os.path.exists(OUT):
    fail("--counters nope: exit %d, %r" % (bad.returncode, bad.stderr))
t0 = time.monotonic()
r = subprocess.run([XPTRACE, "run", "-c", "perfetto", "--counters", "default,cycles", "-o", OUT,
                    "--", BURN], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
wall_ns = (time.monotonic() - t0) * 1e9
err = r.stderr.decode()
if r.returncode != 0:
    fail("exit %d: %s" % (r.returncode, err))
burned = {}
for line in r.stdout.decode().splitlines():
    _, tid, ns = line.split()
    burned[int(tid)] = int(ns)
if len(burned) != 2:
    fail("burn printed %r" % r.stdout)

hw = [l for l in err.splitlines() if "hardware" in l]
if has_pmu:
    if hw:
        fail("a PMU exists, yet: %r" % hw)
else:
    if len(hw) != 1 or not hw[0].startswith("xptrace: hardware counters unavailable (cycles)"):
        fail("no PMU: expected one line about cycles, got %r" % err)

traces = [os.path.join(d, f) for d, _, fs in os.walk(OUT) for f in fs
          if f == "counters.perfetto-trace"]
if len(traces) != 1:
    fail("%d counters.perfetto-trace files under %s" % (len(traces), OUT))
c = subprocess.run([sys.executable, CHECK_TRACE, "proto", PROTO, traces[0]],
                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
if c.returncode != 0:
    fail("check_trace: " + c.stdout.decode())

rep = subprocess.run([XPTRACE, "report", "--format", "json", "--top", "0", OUT],
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
if rep.returncode != 0:
    fail("report: " + rep.stderr.decode())
rows = json.loads(rep.stdout)["counters"]["rows"]
by = {}
for row in rows:
    by.setdefault(row["counter"], []).append(row)


def last(name, tid=None):
    for row in by.get(name, []):
        if tid is None or row.get("tid") == tid:
            return row["last"]
    fail("no %s counter%s in the report: %s" % (name, "" if tid is None else " of %d" % tid,
                                                sorted(by)))


for tid, ns in burned.items():
    got = last("thread-cpu-time", tid)
    if got < ns * 0.98 or got > wall_ns:
        fail("thread %d: thread-cpu-time %d, burn measured %d (wall %d)" % (tid, got, ns, wall_ns))
    if last("thread-page-faults", tid) < 8 * 256 * 0.5:  # 8 MiB of 4 KiB pages, memset
        fail("thread %d: %d page faults for 8 MiB touched" % (tid, last("thread-page-faults", tid)))
    if last("thread-context-switches", tid) < 1:  # it slept
        fail("thread %d: no context switch" % tid)
task = last("task-clock")
# 0.95: the last task-clock sample may precede the threads' end (under TSan
# 348.8 against 359.3 ms burned, 2026-11-27).
if task < sum(burned.values()) * 0.95 or task > 2 * wall_ns:
    fail("task-clock %d, both threads burned %d (wall %d)" % (task, sum(burned.values()), wall_ns))
if last("page-faults") < 2 * 8 * 256 * 0.5:
    fail("page-faults %d for 16 MiB touched" % last("page-faults"))
if last("peak-rss") < 8 << 20:
    fail("peak-rss %d below the 8 MiB a thread touched" % last("peak-rss"))
# each counter's unit, from its track's CounterDescriptor (docs/report.md)
units = {"thread-cpu-time": "ns", "task-clock": "ns", "rss": "bytes", "peak-rss": "bytes",
         "thread-page-faults": "count", "page-faults": "count", "context-switches": "count"}
for name, unit in units.items():
    for row in by.get(name, []):
        if row.get("unit") != unit:
            fail("counter %s: unit %r, not %r" % (name, row.get("unit"), unit))
if has_pmu and last("cycles") <= 0:
    fail("cycles counted nothing")
print("check_counters: ok (thread-cpu-time %s, task-clock %d, wall %d)" %
      ({t: last("thread-cpu-time", t) for t in burned}, task, wall_ns))
