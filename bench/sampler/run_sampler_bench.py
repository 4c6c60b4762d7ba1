#!/usr/bin/env python3
"""The sampler targets of issue 9, measured: `xptrace sample` (perf and
timer methods) next to `perf record` on the same programs in the same run.

usage: run_sampler_bench.py XPTRACE SAMPLER_SHAPES [--runs N] [--quick]
Prints the results as Markdown (the tables of bench/README.md).  Scratch
files go to a temporary folder that is removed at the end."""
import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import tempfile
import time

SPLIT = {"spin_40": 40, "spin_30": 30, "spin_20": 20, "spin_10": 10}


def clean_env():
    env = dict(os.environ)
    for k in list(env):
        if k.startswith("XPTRACE_") or k == "LD_PRELOAD":
            del env[k]
    return env


def timed(cmd, cwd):
    """(wall s, CPU s of the command and its children, stderr)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    p = subprocess.run(cmd, cwd=cwd, env=clean_env(), capture_output=True, text=True)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if p.returncode != 0:
        raise SystemExit("%s: exit %d: %s" % (" ".join(cmd), p.returncode, p.stderr[-2000:]))
    return wall, cpu, p.stderr


class Bench:
    def __init__(self, xptrace, shapes, scratch):
        self.xptrace, self.shapes, self.scratch = xptrace, shapes, scratch
        self.n = 0

    def out(self):
        self.n += 1
        return os.path.join(self.scratch, "o%d" % self.n)

    def xp(self, method, hz, *args, extra=(), prog=None):
        """Leaf-function counts, threads, stacks of an xptrace run."""
        d = self.out()
        wall, cpu, err = timed([self.xptrace, "sample", "--method", method, "-f", str(hz), *extra,
                                "-o", d, "--", prog or self.shapes, *args], self.scratch)
        stacks = []
        folded = os.path.join(d, "samples.folded")
        with open(folded) if os.path.exists(folded) else open(os.devnull) as f:
            for line in f:
                text, _, k = line.rstrip("\n").rpartition(" ")
                stacks.append((text.split(";"), int(k)))
        shutil.rmtree(d)
        return {"stacks": stacks, "wall": wall, "cpu": cpu, "err": err}

    def perf(self, hz, *args, graph=None, script=True, prog=None):
        """Samples of `perf record -e cpu-clock`: (thread, frames innermost first)."""
        data = self.out()
        # user space only, as xptrace samples (perf samples the kernel too when it may)
        cmd = ["perf", "record", "-q", "-e", "cpu-clock:u", "-F", str(hz), "-o", data]
        if graph:
            cmd += ["--call-graph", graph]
        wall, cpu, err = timed(cmd + ["--", prog or self.shapes, *args], self.scratch)
        samples = []
        if script:
            # "pid/tid ip sym" (no call graph) or "pid/tid" then "\tip sym" lines.
            p = subprocess.run(["perf", "script", "-i", data, "-F", "pid,tid,ip,sym"],
                               capture_output=True, text=True, cwd=self.scratch)
            cur = None
            for line in p.stdout.splitlines():
                if not line.strip():
                    cur = None
                elif not line.startswith("\t"):  # the header, its pid right-aligned
                    parts = line.split()
                    pid, _, tid = parts[0].partition("/")
                    cur = ((pid, tid), [])
                    samples.append(cur)
                    if len(parts) > 2:
                        cur[1].append(parts[2])
                elif cur is not None:
                    parts = line.split(None, 1)
                    name = parts[1].strip() if len(parts) > 1 else "[unknown]"
                    cur[1].append(name.split(" (")[0].split("+0x")[0])
        os.unlink(data)
        return {"samples": samples, "wall": wall, "cpu": cpu, "err": err}


def leaf_shares(r, names):
    if "stacks" in r:
        tot = sum(k for _, k in r["stacks"])
        got = {n: sum(k for f, k in r["stacks"] if f[-1] == n) for n in names}
    else:
        tot = len(r["samples"])
        got = {n: sum(1 for _, fr in r["samples"] if fr and fr[0] == n) for n in names}
    return {n: 100.0 * got[n] / tot if tot else 0.0 for n in names}, tot


def threads(r):
    if "stacks" in r:
        return len({f[0] for f, _ in r["stacks"]})
    return len({t for t, _ in r["samples"]})


def long_short(r):
    """Shares (% of all samples) of the long thread (long_spin in the
    stack) and of the short threads (any other thread but main): the
    timer method charges a short thread's undelivered periods to its
    start routine, so a leaf count would miss them."""
    if "stacks" in r:
        tot = sum(k for _, k in r["stacks"])
        lng = sum(k for f, k in r["stacks"] if "long_spin" in f)
        sht = sum(k for f, k in r["stacks"] if "long_spin" not in f and f[0] != "[main]")
    else:
        tot = len(r["samples"])
        lng = sum(1 for _, fr in r["samples"] if "long_spin" in fr)
        sht = sum(1 for t, fr in r["samples"] if "long_spin" not in fr and t[0] != t[1])
    return (100.0 * lng / tot, 100.0 * sht / tot) if tot else (0.0, 0.0)


def incl(r, name):
    if "stacks" in r:
        tot = sum(k for _, k in r["stacks"])
        return 100.0 * sum(k for f, k in r["stacks"] if name in f[1:]) / tot if tot else 0.0
    tot = len(r["samples"])
    return 100.0 * sum(1 for _, fr in r["samples"] if name in fr) / tot if tot else 0.0


def fmt_split(sh):
    return "/".join("%.1f" % sh[n] for n in SPLIT)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("xptrace")
    ap.add_argument("shapes")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    a = ap.parse_args()
    scratch = tempfile.mkdtemp(prefix="xptrace-sampler-bench-")
    try:
        run(Bench(os.path.abspath(a.xptrace), os.path.abspath(a.shapes), scratch), a)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def run(b, a):
    q = a.quick
    tools = [("xptrace perf", lambda hz, *x, **k: b.xp("perf", hz, *x, **k)),
             ("xptrace timer", lambda hz, *x, **k: b.xp("timer", hz, *x, **k)),
             ("perf record", lambda hz, *x, **k: b.perf(hz, *x))]
    print("### Shapes (shares of samples in %, leaf function)\n")
    if not shutil.which("perf"):  # Debian: linux-perf
        tools.pop()
        print("(perf record left out: `perf` is not installed)\n")
    print("| program | target | %s |" % " | ".join(t for t, _ in tools))
    print("|---|---|---|" + "---|" * (len(tools) - 1))
    # 40/30/20/10: about 2.5 CPU-s per 100 units; more at 100 Hz for enough samples.
    for hz, units in ((100, 40 if q else 400), (1000, 20 if q else 100)):
        cells, worst = [], []
        for _, fn in tools:
            sh, tot = leaf_shares(fn(hz, "split", str(units)), SPLIT)
            dev = max(abs(sh[n] - SPLIT[n]) for n in SPLIT)
            cells.append("%s (max dev %.1f, %d samples)" % (fmt_split(sh), dev, tot))
        print("| 4 threads 40/30/20/10, %d Hz | each within ±2 | %s |" % (hz, " | ".join(cells)))
    nshort = 100 if q else 500
    cells = []
    for _, fn in tools:
        r = fn(1000, "short", str(nshort))
        lng, sht = long_short(r)
        cells.append("%.1f/%.1f, %d threads sampled" % (lng, sht, threads(r)))
    print("| 1 long + %d short threads (long/short), 1 kHz | 50/50 ±5 | %s |" % (nshort, " | ".join(cells)))
    cells = []
    for _, fn in tools:
        sh, tot = leaf_shares(fn(1000, "blocked", "8" if q else "40"), ("blocked_spin", "free_spin"))
        cells.append("%.1f/%.1f (%d samples)" % (sh["blocked_spin"], sh["free_spin"], tot))
    print("| 2 threads, one blocking every signal (blocked/free), 1 kHz | 50/50 | %s |" % " | ".join(cells))
    # Deep recursion: inclusive share of main; perf record needs DWARF unwinding here.
    cells = []
    for name, fn in tools:
        if name == "perf record":
            r = b.perf(1000, "deep", "200", graph="dwarf")
        else:
            r = fn(1000, "deep", "200")
        trunc = "truncation printed" if "[truncated]" in r.get("err", "") or "were cut" in r.get("err", "") else ""
        if "samples" in r:  # perf record: say how deep its stacks went
            trunc = "--call-graph dwarf, stacks of at most %d frames" % max(len(fr) for _, fr in r["samples"])
        cells.append("main %.1f%%%s" % (incl(r, "main"), ", " + trunc if trunc else ""))
    print("| recursion 200 frames deep, default depth | main 100%% | %s |" % " | ".join(cells))

    # Rate and overhead on one thread spinning: each sampled run next to an
    # unsampled one just before it (the machine's speed drifts), medians of
    # the ratios over a.runs pairs.
    units = "8" if q else "40"
    bare = [timed([b.shapes, "spin", units], b.scratch) for _ in range(a.runs)]
    bare_wall = statistics.median(w for w, _, _ in bare)
    bare_cpu = statistics.median(c for _, c, _ in bare)
    print("\n### Rate and overhead (one thread spinning %.2f CPU-s; median of %d pairs)\n" % (bare_cpu, a.runs))
    print("Samples per CPU-second of the unsampled run, and as xptrace prints it (per CPU-second of the sampled "
          "run, all its processes); overheads: wall and CPU of the whole command, the tool's own work included "
          "(xptrace: its report too; perf record: not its `perf script`), against an unsampled run just before.\n")
    print("| tool | Hz asked | samples per CPU-s (target ≥ 950 at 1 kHz) | xptrace prints | wall overhead "
          "| CPU overhead |")
    print("|---|---|---|---|---|---|")
    rows = [("xptrace sample (perf, DWARF)", lambda hz: b.xp("perf", hz, "spin", units)),
            ("xptrace sample (perf, fp)", lambda hz: b.xp("perf", hz, "spin", units, extra=("--call-graph", "fp"))),
            ("xptrace sample (timer)", lambda hz: b.xp("timer", hz, "spin", units)),
            ("perf record -g (fp)", lambda hz: b.perf(hz, "spin", units, graph="fp")),
            ("perf record --call-graph dwarf", lambda hz: b.perf(hz, "spin", units, graph="dwarf"))]
    rows = [r for r in rows if shutil.which("perf") or not r[0].startswith("perf")]
    for hz in (1000, 10000):
        for name, fn in rows:
            if hz == 10000 and "fp" in name:
                continue
            n, printed, dw, dc = [], [], [], []
            for _ in range(a.runs):
                w0, c0, _ = timed([b.shapes, "spin", units], b.scratch)
                r = fn(hz)
                n.append(sum(k for _, k in r["stacks"]) if "stacks" in r else len(r["samples"]))
                m = re.search(r"(\d+) samples per CPU-second", r["err"])
                if m:
                    printed.append(int(m.group(1)))
                dw.append(100.0 * (r["wall"] - w0) / w0)
                dc.append(100.0 * (r["cpu"] - c0) / c0)
            print("| %s | %d | %.0f | %s | %+.1f%% | %+.1f%% |"
                  % (name, hz, statistics.median(n) / bare_cpu,
                     "%.0f" % statistics.median(printed) if printed else "", statistics.median(dw),
                     statistics.median(dc)))

    # Fixed cost: sampling `true`.
    true = shutil.which("true") or "/bin/true"
    k = max(a.runs, 5)
    t_bare = statistics.median(timed([true], b.scratch)[0] for _ in range(k))
    print("\n### Fixed cost (sampling `true`; median of %d)\n" % k)
    print("| tool | wall ms | cost ms (target ≤ 20) |")
    print("|---|---|---|")
    print("| none | %.1f | |" % (1e3 * t_bare))
    fixed = [("xptrace sample (perf)", lambda: b.xp("perf", 1000, prog=true)["wall"]),
             ("xptrace sample (timer)", lambda: b.xp("timer", 1000, prog=true)["wall"]),
             ("perf record -g", lambda: b.perf(1000, prog=true, graph="fp", script=False)["wall"]),
             ("perf record --call-graph dwarf", lambda: b.perf(1000, prog=true, graph="dwarf", script=False)["wall"])]
    fixed = [r for r in fixed if shutil.which("perf") or not r[0].startswith("perf")]
    for name, fn in fixed:
        t = statistics.median(fn() for _ in range(k))
        print("| %s | %.1f | %.1f |" % (name, 1e3 * t, 1e3 * (t - t_bare)))

if __name__ == "__main__":
    main()
