#!/usr/bin/env python3
"""Accuracy matrix of `xptrace sample` (issue 26): thread shapes x methods x
rates, next to `perf record` in the same run.  Truth: each thread's CPU time
as the kernel counted it, printed by the program itself (shape_work).

usage: accuracy_matrix.py XPTRACE SHAPE_WORK [--runs N]
Shapes: long + 500 threads of 2 ms (long_work / st inclusive, st self);
compute + read()-heavy thread (compute_work / read_work inclusive).
Columns: share read (truth), per run.  perf record is left out where
`perf` is missing; `perf record -a` (per-CPU, as root) where permitted.
Then off-CPU (`--off-cpu --clock both`, perf method, kernel sampling
permitted): thread waiter of `shape_work offcpu 25`, its wall-time shares
and off-CPU split against the parts as it timed them (perf record's
--off-cpu needs a perf built with BPF skeletons: not compared)."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

xptrace, work = sys.argv[1], sys.argv[2]
runs = int(sys.argv[sys.argv.index("--runs") + 1]) if "--runs" in sys.argv else 1
scratch = tempfile.mkdtemp(prefix="xpt-acc-")
env = {k: v for k, v in os.environ.items() if not k.startswith("XPTRACE_") and k != "LD_PRELOAD"}
SHAPES = {"short": (["short", "500", "2"], ("long_work", "long"), ("st", "short")),
          "read": (["read", "500"], ("compute_work", "compute"), ("read_work", "read"))}


def truth(out):
    m = re.search(r"^cpu (.*)$", out, re.M)
    cpu = {k: float(v) for k, v in (kv.split("=") for kv in m.group(1).split())}
    return cpu, sum(cpu.values())


def xp(method, hz, args, extra_env=None):
    d = os.path.join(scratch, "x")
    shutil.rmtree(d, ignore_errors=True)
    e = dict(env, **(extra_env or {}))
    p = subprocess.run([xptrace, "sample", "--method", method, "-f", str(hz), "-o", d, "--", work] + args,
                       env=e, capture_output=True, text=True)
    stacks = []
    with open(os.path.join(d, "samples.folded")) as f:
        for line in f:
            text, _, n = line.rstrip("\n").rpartition(" ")
            stacks.append((text.split(";"), int(n)))
    n = sum(k for _, k in stacks) or 1
    share = {fn: 100.0 * sum(k for f, k in stacks if fn in f[1:]) / n for fn in ("long_work", "st", "compute_work",
                                                                              "read_work")}
    share["st self"] = 100.0 * sum(k for f, k in stacks if f[-1] == "st") / n
    return p.stdout, share


def perf_record(hz, args, wide):
    data = os.path.join(scratch, "perf.data")
    cmd = ["perf", "record", "-q", "-e", "cpu-clock", "-F", str(hz), "--call-graph", "dwarf", "-o", data]
    cmd += ["-a", "--"] if wide else ["--"]
    p = subprocess.run(cmd + [work] + args, env=env, capture_output=True, text=True)
    rep = subprocess.run(["perf", "report", "--stdio", "-i", data, "--children", "--sort", "sym", "-g", "none",
                          "--comm", "shape_work", "--percentage", "relative"], env=env, capture_output=True, text=True).stdout
    share = {}
    for line in rep.splitlines():
        m = re.match(r"\s*([0-9.]+)%\s+([0-9.]+)%\s+\[.\]\s+(\S+)", line)
        if m and m.group(3) in ("long_work", "st", "compute_work", "read_work"):
            share[m.group(3)] = float(m.group(1))
            if m.group(3) == "st":
                share["st self"] = float(m.group(2))
    return p.stdout, share


def main():
    have_perf = shutil.which("perf") is not None
    cols = [("perf (per-CPU)", lambda hz, a: xp("perf", hz, a)),
            ("perf (per-thread, user)", lambda hz, a: xp("perf", hz, a, {"XPTRACE_SAMPLE_SCOPE": "thread",
                                                                         "XPTRACE_SAMPLE_KERNEL": "0"})),
            ("timer", lambda hz, a: xp("timer", hz, a))]
    if have_perf:
        cols += [("perf record", lambda hz, a: perf_record(hz, a, False))]
        if os.geteuid() == 0:
            cols += [("perf record -a", lambda hz, a: perf_record(hz, a, True))]
    print("| shape | Hz | function: truth | " + " | ".join(c for c, _ in cols) + " |")
    print("| --- | --- | --- |" + " --- |" * len(cols))
    for shape, (args, a, b) in SHAPES.items():
        for hz in (100, 1000):
            cells = {c: [] for c, _ in cols}
            truths = []
            for _ in range(runs):
                for c, fn in cols:
                    out, share = fn(hz, args)
                    cpu, all_cpu = truth(out)
                    truths.append((100 * cpu[a[1]] / all_cpu, 100 * cpu[b[1]] / all_cpu))
                    cell = f"{share.get(a[0], 0):.0f}/{share.get(b[0], 0):.0f}"
                    if shape == "short":
                        cell += f" ({share.get('st self', 0):.0f})"
                    cells[c].append(cell)
            ta = sum(t[0] for t in truths) / len(truths)
            tb = sum(t[1] for t in truths) / len(truths)
            print(f"| {shape} | {hz} | {a[0]}/{b[0]}: {ta:.0f}/{tb:.0f} | " +
                  " | ".join(", ".join(cells[c]) for c, _ in cols) + " |")
    offcpu()
    shutil.rmtree(scratch, ignore_errors=True)


def folded(path, thread_suffix):
    out = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                text, _, n = line.rstrip("\n").rpartition(" ")
                frames = text.split(";")
                if frames[0].endswith(thread_suffix):
                    out.append((frames, int(n)))
    return out


def offcpu():
    print("\n| off-CPU (thread waiter) | Hz | wall: compute/sleep/lock, truth | read | "
          "off-CPU: sleep/lock, truth | read | wall-time sum / lifetime |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for hz in (100, 1000):
        for _ in range(runs):
            d = os.path.join(scratch, "o")
            shutil.rmtree(d, ignore_errors=True)
            p = subprocess.run([xptrace, "sample", "--off-cpu", "--clock", "both", "-f", str(hz), "-o", d, "--",
                                work, "offcpu", "25"], env=env, capture_output=True, text=True)
            m = re.search(r"wall waiter=(\S+) compute=(\S+) sleep=(\S+) lock=(\S+)", p.stdout)
            if not m or "no off-CPU profile" in p.stderr:
                print(f"| (not measured: {p.stderr.strip().splitlines()[-1] if p.stderr.strip() else p.returncode}) |")
                return
            life, comp, slp, lck = (float(x) * 1e6 for x in m.groups())
            rt = folded(os.path.join(d, "samples_realtime.folded"), ":waiter]")
            off = folded(os.path.join(d, "samples_offcpu.folded"), ":waiter]")
            nrt = sum(k for _, k in rt) or 1
            noff = sum(k for _, k in off) or 1

            def inc(st, fn):
                return sum(k for f, k in st if fn in f[1:])
            print(f"| waiter | {hz} | {100 * comp / life:.0f}/{100 * slp / life:.0f}/{100 * lck / life:.0f} | "
                  f"{100 * inc(rt, 'wait_compute') / nrt:.0f}/{100 * inc(rt, 'sleep_part') / nrt:.0f}/"
                  f"{100 * inc(rt, 'lock_part') / nrt:.0f} | {100 * slp / (slp + lck):.0f}/{100 * lck / (slp + lck):.0f} | "
                  f"{100 * inc(off, 'sleep_part') / noff:.0f}/{100 * inc(off, 'lock_part') / noff:.0f} | "
                  f"{nrt / 1e3:.0f} / {life / 1e3:.0f} ms |")


main()
