#!/usr/bin/env python3
"""`xptrace sample` on Debian's own programs (not timed; issue 26's truth
check on real code): python3 running two functions of known CPU split,
xz -9 on a file, sort on a big file: `xptrace sample`, then `perf record`
on the same command and input.  Not in one run: perf 6.1 here cannot
report a `perf record -- xptrace sample -- ...` nor a `perf record -p` of
a process xptrace samples too (it asserts in util/build-id.c and aborts),
and `perf record -p` on a process that execs recorded nothing.

Compared: the share of self samples by shared object (xptrace's
samples.csv module column, `perf report --sort dso`), and for python3 the
two functions' shares against what they timed themselves (thread CPU
time): hash_part (SHA-256 in libcrypto) and pack_part (zlib's deflate),
2:1 by construction, each call short so the split holds.

usage: real_programs.py XPTRACE [--hz 1000] [--secs 3]"""
import argparse
import collections
import csv
import os
import re
import shutil
import subprocess
import sys
import tempfile

SPLIT_PY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "xptrace_sample",
                        "python_split.py")


def canon(dso):
    """libz.so.1.2.13 and libz.so.1 are one library; [kernel.kallsyms] is [kernel]."""
    dso = os.path.basename(dso)
    if dso.startswith("[kernel"):
        return "[kernel]"
    return re.sub(r"\.so(\.\d+)*$", ".so", dso)


def xptrace_dsos(out):
    by = collections.Counter()
    with open(os.path.join(out, "samples.csv")) as f:
        for row in csv.DictReader(f):
            by[canon(row["module"])] += int(row["self_samples"])
    return by


def perf_dsos(data):
    p = subprocess.run(["perf", "report", "-i", data, "--stdio", "--no-children", "--sort", "dso"],
                       capture_output=True, text=True)
    by = collections.Counter()
    for line in p.stdout.splitlines():
        m = re.match(r"\s*([0-9.]+)%\s+(\S+)", line)
        if m:
            by[canon(m.group(2))] += float(m.group(1))
    return by


def perf_count(data):
    p = subprocess.run(["perf", "report", "-i", data, "--stdio", "--no-children", "--sort", "dso"],
                       capture_output=True, text=True)
    m = re.search(r"# Samples: (\S+)", p.stdout)
    return m.group(1) if m else "?"


def shares(c):
    n = sum(c.values()) or 1
    return {k: 100.0 * v / n for k, v in c.items()}


def run_one(xptrace, hz, name, cmd, work):
    """xptrace sample, then perf record, on the same command and input."""
    out, data = os.path.join(work, name), os.path.join(work, name + ".perf")
    p = subprocess.run([xptrace, "sample", "-f", str(hz), "-o", out, "--"] + cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"{name}: exit {p.returncode}: {p.stderr}")
    q = subprocess.run(["perf", "record", "-q", "-F", str(hz), "-o", data, "--"] + cmd, capture_output=True,
                       text=True)
    x, pf = shares(xptrace_dsos(out)), shares(perf_dsos(data))
    print(f"\n{name}: self samples by shared object, % (xptrace | perf record, same command and input)")
    for dso in sorted(set(x) | set(pf), key=lambda d: -max(x.get(d, 0), pf.get(d, 0)))[:6]:
        print(f"  {dso:28s} {x.get(dso, 0):6.1f} | {pf.get(dso, 0):6.1f}")
    rate = re.search(r"method perf .*?: (\d+) samples per CPU-second \((\d+) samples, ([0-9.]+) CPU", p.stderr)
    if rate:
        print(f"  xptrace: {rate.group(2)} samples for {rate.group(3)} CPU-s ({rate.group(1)} per CPU-second); "
              f"perf record: {perf_count(data)} samples")
    return out, p.stdout + q.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("xptrace")
    ap.add_argument("--hz", type=int, default=1000)
    ap.add_argument("--secs", type=float, default=3)
    a = ap.parse_args()
    if not shutil.which("perf"):
        sys.exit("needs perf (Debian linux-perf)")
    work = tempfile.mkdtemp(prefix="xptrace-real-")
    out, stdout = run_one(a.xptrace, a.hz, "python3", ["/usr/bin/python3", SPLIT_PY, str(a.secs)], work)
    m = re.search(r"hash_part=([0-9.]+) pack_part=([0-9.]+) process=([0-9.]+)", stdout)
    truth = {"hash_part": float(m.group(1)), "pack_part": float(m.group(2))}
    proc = float(m.group(3))
    n = hashed = packed = 0
    with open(os.path.join(out, "samples.folded")) as f:
        for line in f:
            stack, _, k = line.rstrip("\n").rpartition(" ")
            n += int(k)
            hashed += int(k) * ("SHA256" in stack or "_hashlib" in stack)
            packed += int(k) * (";deflate" in stack)
    print(f"  functions (stacks through SHA-256 / deflate) against their own thread CPU time:")
    print(f"  hash_part {100.0 * hashed / n:5.1f} % (truth {100 * truth['hash_part'] / proc:5.1f} %), "
          f"pack_part {100.0 * packed / n:5.1f} % (truth {100 * truth['pack_part'] / proc:5.1f} %); split "
          f"{100.0 * hashed / (hashed + packed):.1f}:{100.0 * packed / (hashed + packed):.1f} (truth "
          f"{100 * truth['hash_part'] / (truth['hash_part'] + truth['pack_part']):.1f}:"
          f"{100 * truth['pack_part'] / (truth['hash_part'] + truth['pack_part']):.1f}); the rest: their "
          f"self-timing (clock_gettime) and the interpreter's loop")

    big = os.path.join(work, "input.bin")  # compressible, not trivial: the system's own programs
    with open(big, "wb") as f:
        for name in sorted(os.listdir("/usr/bin"))[:400]:
            path = os.path.join("/usr/bin", name)
            if os.path.isfile(path) and f.tell() < 2 << 20:
                with open(path, "rb") as g:
                    f.write(g.read((2 << 20) - f.tell()))
    run_one(a.xptrace, a.hz, "xz", ["sh", "-c", f"exec xz -9 -T1 -c {big} > /dev/null"], work)
    lines = os.path.join(work, "lines.txt")
    with open(lines, "w") as f:
        x = 12345
        for i in range(600_000):
            x = (x * 6364136223846793005 + 1442695040888963407) % (1 << 64)
            f.write(f"{x:020d} line {i}\n")
    run_one(a.xptrace, a.hz, "sort", ["sort", "-o", "/dev/null", lines], work)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
